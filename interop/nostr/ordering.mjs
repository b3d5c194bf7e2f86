// NIP-01 ordering of stored events: newest first, and on equal created_at
// the lowest id first, so that limit cuts the same events on every relay.
import { test, run, newUser, now, connect, publish, query } from './harness.mjs';

test('created_at ties: lowest id first, and limit cuts in that order', async (t) => {
  const relay = await connect();
  const u = newUser();
  const ts = now() - 500;
  const evs = [0, 1, 2, 3].map((i) => u.event({ created_at: ts, content: 'tie ' + i }));
  for (const e of evs) t.ok((await publish(relay, e)).ok, 'publish');
  const byID = evs.map((e) => e.id).sort();
  t.equal((await query(relay, [{ authors: [u.pk] }])).map((e) => e.id), byID, 'ties ordered by id');
  t.equal((await query(relay, [{ authors: [u.pk], limit: 2 }])).map((e) => e.id), byID.slice(0, 2), 'limit 2 keeps the lowest ids');
  relay.close();
});

await run();
