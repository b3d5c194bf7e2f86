// NIP-70 protected events: an event with a ["-"] tag is accepted only from
// a connection authenticated (NIP-42) as its author.
import { finalizeEvent } from 'nostr-tools/pure';
import { test, run, newUser, connect, publish, query, pollUntil, expectPrefix } from './harness.mjs';

async function authedAs(user) {
  const relay = await connect();
  const probe = user.event({ content: 'probe', tags: [['-']] });
  await publish(relay, probe); // makes the relay send its challenge if it did not on connect
  if (!(await pollUntil(() => relay.challenge, 10000))) throw new Error('no AUTH challenge from the relay');
  await relay.auth(async (tmpl) => finalizeEvent(tmpl, user.sk));
  return relay;
}

test('protected event without AUTH is refused with auth-required:', async (t) => {
  const relay = await connect();
  const u = newUser();
  const e = u.event({ content: 'protected', tags: [['-']] });
  const r = await publish(relay, e);
  t.ok(!r.ok, 'OK false', r);
  expectPrefix(t, r.message, 'auth-required:', 'unauthenticated protected event');
  t.equal(await query(relay, [{ ids: [e.id] }]), [], 'not stored');
  relay.close();
});

test('protected event from a connection authenticated as someone else is refused', async (t) => {
  const author = newUser();
  const other = newUser();
  const relay = await authedAs(other);
  const e = author.event({ content: 'protected, republished by other', tags: [['-']] });
  const r = await publish(relay, e);
  t.ok(!r.ok, 'OK false', r);
  expectPrefix(t, r.message, ['restricted:', 'blocked:', 'auth-required:'], 'protected event of another author');
  t.equal(await query(relay, [{ ids: [e.id] }]), [], 'not stored');
  relay.close();
});

test('protected event from its authenticated author is accepted and readable by anyone', async (t) => {
  const author = newUser();
  const relay = await authedAs(author);
  const e = author.event({ content: 'protected, by its author', tags: [['-']] });
  const r = await publish(relay, e);
  t.ok(r.ok, 'OK true', r);
  relay.close();
  const reader = await connect();
  t.equal((await query(reader, [{ ids: [e.id] }])).map((x) => x.id), [e.id], 'served to an unauthenticated reader');
  reader.close();
});

await run();
