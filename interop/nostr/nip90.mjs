// NIP-90 (data vending machines) against a node whose [compute] nip90
// bridge is on: a 5970 proof-of-work request gets a 7000 "processing",
// then a 6970 whose content is the mined event (its id is its hash and
// has the leading zero bits asked for), then "success"; a 5400 count is
// answered with the count; and no answer ever carries a payment field
// (amount, bid, an invoice, "payment-required"), though the requests
// offer a bid. With options.wasm it also times KindWasm requests.
import { test, run, newUser, now, connect, publish, live, pollUntil, options } from './harness.mjs';
import { getEventHash } from 'nostr-tools/pure';
import { getPow } from 'nostr-tools/nip13';
import { writeFileSync } from 'node:fs';

// answers waits until the subscription holds a result of kind, and
// returns every answer to the request so far.
async function answers(state, kind, timeoutMs = 30000) {
  await pollUntil(() => state.events.some((e) => e.kind === kind || (e.kind === 7000 && status(e) === 'error')), timeoutMs, 20);
  return state.events;
}

const status = (e) => (e.tags.find((t) => t[0] === 'status') || [])[1];

function noPayment(t, events) {
  for (const e of events) {
    const s = JSON.stringify(e);
    t.ok(!e.tags.some((tg) => tg[0] === 'amount' || tg[0] === 'bid'), 'no amount or bid tag in kind ' + e.kind, e);
    t.ok(!/payment-required|lnbc/i.test(s), 'no payment-required status nor invoice in kind ' + e.kind, e);
  }
}

async function ask(relay, u, req) {
  const ev = u.event(req);
  const state = live(relay, [{ kinds: [7000, req.kind + 1000], '#e': [ev.id] }]);
  await state.eosePromise;
  const sent = Date.now();
  const r = await publish(relay, ev);
  return { ev, state, sent, ok: r.ok };
}

test('5970 proof of work: processing, then a valid mined event, then success', async (t) => {
  const relay = await connect();
  const u = newUser();
  const tmpl = JSON.stringify({ kind: 1, content: 'do work!', created_at: now(), tags: [] });
  const { state, ok } = await ask(relay, u, { kind: 5970, tags: [['i', tmpl, 'text'], ['param', 'pow', '12'], ['bid', '21000']] });
  t.ok(ok, 'request published');
  const evs = await answers(state, 6970);
  const res = evs.find((e) => e.kind === 6970);
  t.ok(res, 'a 6970 result came', evs);
  const first = evs.find((e) => e.kind === 7000);
  t.ok(first && status(first) === 'processing', 'the first feedback is processing', first);
  t.ok(evs.indexOf(first) < evs.indexOf(res), 'processing came before the result');
  if (res) {
    const mined = JSON.parse(res.content);
    t.equal(mined.pubkey, u.pk, 'mined for the requester');
    t.equal(getEventHash(mined), mined.id, 'the mined id is the event hash');
    t.ok(getPow(mined.id) >= 12, 'the id has 12 leading zero bits', mined.id);
    t.ok(res.tags.some((tg) => tg[0] === 'p' && tg[1] === u.pk), 'the result names the requester');
  }
  await pollUntil(() => state.events.some((e) => e.kind === 7000 && status(e) === 'success'), 10000, 20);
  t.ok(state.events.some((e) => e.kind === 7000 && status(e) === 'success'), 'a success feedback came');
  noPayment(t, state.events);
  relay.close();
});

test('5400 count', async (t) => {
  const relay = await connect();
  const u = newUser();
  const tag = 'nip90-' + Math.random().toString(36).slice(2);
  for (let i = 0; i < 3; i++) t.ok((await publish(relay, u.event({ kind: 1, content: 'c' + i, tags: [['t', tag]] }))).ok, 'publish');
  const { state } = await ask(relay, u, { kind: 5400, content: JSON.stringify([{ '#t': [tag] }]), tags: [['bid', '5000']] });
  const evs = await answers(state, 6400);
  const res = evs.find((e) => e.kind === 6400);
  t.equal(res && res.content, '3', 'the count');
  noPayment(t, evs);
  relay.close();
});

if (options.wasm) {
  test('WebAssembly jobs over the bridge, timed', async (t) => {
    const relay = await connect();
    const u = newUser();
    const times = [];
    for (let i = 0; i < options.wasm.runs; i++) {
      const { state, sent } = await ask(relay, u, {
        kind: 5990,
        content: 'run ' + i, // a new request each time, never a duplicate of the last
        tags: [['i', options.wasm.module, 'text', '', 'module'], ['i', options.wasm.input, 'text'], ['param', 'module', options.wasm.cid]],
      });
      const evs = await answers(state, 6990, 60000);
      const res = evs.find((e) => e.kind === 6990);
      t.ok(res, 'a 6990 result came', evs);
      if (!res) break;
      times.push(Date.now() - sent);
      t.equal(Buffer.from(res.content, 'base64').toString(), options.wasm.want, 'the output');
      noPayment(t, evs);
      state.sub.close();
    }
    times.sort((a, b) => a - b);
    const summary = JSON.stringify({ runs: times.length, median_ms: times[Math.floor(times.length / 2)], max_ms: times[times.length - 1], all_ms: times });
    console.log('# wasm request-to-result ' + summary);
    if (options.wasm.out) writeFileSync(options.wasm.out, summary);
    relay.close();
  });
}

await run();
