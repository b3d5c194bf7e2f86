// NIP-45 COUNT, with nostr-tools' count() and raw frames.
import { test, run, newUser, now, connect, publish, RawClient } from './harness.mjs';

test('COUNT with nostr-tools and with several filters', async (t) => {
  const relay = await connect();
  const u = newUser();
  const base = now() - 100;
  for (let i = 0; i < 3; i++) t.ok((await publish(relay, u.event({ kind: 1, created_at: base + i, content: 'n' + i }))).ok, 'publish note');
  for (let i = 0; i < 2; i++) t.ok((await publish(relay, u.event({ kind: 7, created_at: base + i, content: '+' }))).ok, 'publish reaction');
  t.equal(await relay.count([{ authors: [u.pk], kinds: [1] }], {}), 3, 'count of kind 1');
  t.equal(await relay.count([{ authors: [u.pk], kinds: [1] }, { authors: [u.pk], kinds: [7] }], {}), 5, 'count of two filters');
  t.equal(await relay.count([{ authors: [u.pk], since: base + 1 }], {}), 3, 'count with since');
  t.equal(await relay.count([{ authors: [u.pk] }, { authors: [u.pk], kinds: [1] }], {}), 5, 'overlapping filters count each event once');
  t.equal(await relay.count([{ authors: [newUser().pk] }], {}), 0, 'count of nothing');
  relay.close();

  const raw = await RawClient.open();
  raw.send(['COUNT', 'c1', { authors: [u.pk] }]);
  const m = await raw.next((x) => x[1] === 'c1');
  t.ok(m && m[0] === 'COUNT' && m[2] && m[2].count === 5, 'raw COUNT answer ["COUNT", id, {"count": 5}]', m);
  raw.close();
});

await run();
