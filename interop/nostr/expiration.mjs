// NIP-40 expiration, with nostr-tools.
import { test, run, newUser, now, connect, publish, query, pollUntil, expectPrefix } from './harness.mjs';

test('an already expired event is refused or at least never served', async (t) => {
  const relay = await connect();
  const u = newUser();
  const e = u.event({ content: 'expired', tags: [['expiration', String(now() - 10)]] });
  const r = await publish(relay, e);
  if (!r.ok) expectPrefix(t, r.message, ['invalid:', 'blocked:', 'restricted:'], 'expired event refusal');
  t.equal(await query(relay, [{ ids: [e.id] }]), [], 'not served');
  relay.close();
});

test('an event expiring in a few seconds is served, then disappears', async (t) => {
  const relay = await connect();
  const u = newUser();
  const e = u.event({ content: 'short-lived', tags: [['expiration', String(now() + 3)]] });
  const keep = u.event({ content: 'no expiration' });
  t.ok((await publish(relay, e)).ok, 'publish expiring event');
  t.ok((await publish(relay, keep)).ok, 'publish lasting event');
  t.equal((await query(relay, [{ ids: [e.id] }])).map((x) => x.id), [e.id], 'served before expiry');
  const gone = await pollUntil(async () => (await query(relay, [{ ids: [e.id] }])).length === 0, 20000, 250);
  t.ok(gone, 'not served after its expiration time');
  t.equal(await relay.count([{ ids: [e.id] }], {}), 0, 'not counted after its expiration time');
  t.equal((await query(relay, [{ authors: [u.pk] }])).map((x) => x.id), [keep.id], 'the event without expiration stays');
  relay.close();
});

await run();
