// Issue 30's first scenario with nostr-tools: the relay under test is
// one node of a mesh; options.peers are the other nodes' relay URLs.
// Right after the node acknowledges a deletion or a replacement, its
// REQs never serve what was deleted or replaced, though the peers it
// looks up may not have applied the write yet; then every peer's reads
// agree within options.convergeMs.
import { Relay } from 'nostr-tools/relay';
import { test, run, newUser, now, connect, publish, query, pollUntil, options } from './harness.mjs';

const trials = options.trials || 5;
const convergeMs = options.convergeMs || 30000;

async function connectTo(url) {
  const relay = await Relay.connect(url);
  relay.baseEoseTimeout = 600000;
  relay.publishTimeout = 10000;
  return relay;
}

const ids = (evs) => evs.map((e) => e.id).sort();

// served waits until every peer serves every one of evs by id.
async function servedEverywhere(peers, evs) {
  return pollUntil(async () => {
    for (const p of peers) {
      if ((await query(p, [{ ids: evs.map((e) => e.id) }])).length !== evs.length) return false;
    }
    return true;
  }, convergeMs, 100);
}

test(`deletions and replacements are read at once at the node that took them (${trials} trials)`, async (t) => {
  const relay = await connect();
  const peers = await Promise.all((options.peers || []).map(connectTo));
  t.ok(peers.length >= 2, 'the script is given the other nodes', options.peers);
  for (let i = 0; i < trials; i++) {
    const u = newUser();
    const base = now() - 100;
    const note = u.event({ content: `note ${i}` , created_at: base });
    const p1 = u.event({ kind: 0, content: '{"name":"old"}', created_at: base });
    const a1 = u.event({ kind: 30023, tags: [['d', 'x']], content: 'article, first', created_at: base });
    for (const e of [note, p1, a1]) t.ok((await publish(relay, e)).ok, `trial ${i}: publish ${e.content}`);
    t.ok(await servedEverywhere(peers, [note, p1, a1]), `trial ${i}: the peers serve the first versions`);

    const del = u.event({ kind: 5, tags: [['e', note.id]], created_at: base + 10 });
    const p2 = u.event({ kind: 0, content: '{"name":"new"}', created_at: base + 10 });
    const a2 = u.event({ kind: 30023, tags: [['d', 'x']], content: 'article, second', created_at: base + 10 });
    for (const e of [del, p2, a2]) t.ok((await publish(relay, e)).ok, `trial ${i}: publish the write ${e.kind}`);
    t.equal(await query(relay, [{ ids: [note.id] }]), [], `trial ${i}: the deleted note by id, right after`);
    t.equal(ids(await query(relay, [{ kinds: [0], authors: [u.pk] }])), [p2.id], `trial ${i}: the profile, right after`);
    t.equal(ids(await query(relay, [{ kinds: [30023], authors: [u.pk] }])), [a2.id], `trial ${i}: the article, right after`);
    t.equal(ids(await query(relay, [{ authors: [u.pk] }])), ids([del, p2, a2]), `trial ${i}: everything by the author, right after`);

    const agree = await pollUntil(async () => {
      for (const p of peers) {
        if ((await query(p, [{ ids: [note.id, p1.id, a1.id] }])).length !== 0) return false;
        if (ids(await query(p, [{ authors: [u.pk] }])).join() !== ids([del, p2, a2]).join()) return false;
      }
      return true;
    }, convergeMs, 100);
    t.ok(agree, `trial ${i}: every peer's reads agree within ${convergeMs} ms`);
  }
  for (const p of peers) p.close();
  relay.close();
});

run();
