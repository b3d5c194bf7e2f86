// Ephemeral events (20000-29999): delivered to live subscribers, never
// stored. With nostr-tools.
import { test, run, newUser, connect, publish, query, live, pollUntil } from './harness.mjs';

test('ephemeral event is delivered live and not stored', async (t) => {
  const sub = await connect();
  const pub = await connect();
  const u = newUser();
  const state = live(sub, [{ authors: [u.pk], kinds: [20001] }]);
  await state.eosePromise;
  t.ok(state.eose, 'EOSE', state.closedReason);
  const e = u.event({ kind: 20001, content: 'now or never' });
  const r = await publish(pub, e);
  t.ok(r.ok, 'OK true for an ephemeral event', r);
  await pollUntil(() => state.events.length > 0, 10000);
  t.equal(state.events.map((x) => x.id), [e.id], 'live subscriber got it');
  t.equal(await query(pub, [{ ids: [e.id] }]), [], 'not served by id afterwards');
  t.equal(await query(pub, [{ authors: [u.pk] }]), [], 'not served by author afterwards');
  t.equal(await pub.count([{ authors: [u.pk] }], {}), 0, 'not counted');
  sub.close();
  pub.close();
});

await run();
