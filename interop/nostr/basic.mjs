// NIP-01 and NIP-11 with nostr-tools: publish, stored and live
// subscriptions, EOSE, filters (ids, authors, kinds, tags, since, until,
// limit, several filters), ordering, duplicates, bad signatures.
import { fetchRelayInformation, useFetchImplementation } from 'nostr-tools/nip11';
import { test, run, relayURL, newUser, now, connect, publish, query, live, pollUntil, expectPrefix, RawClient } from './harness.mjs';

useFetchImplementation(fetch);

test('NIP-11 information document (nostr-tools fetchRelayInformation)', async (t) => {
  const info = await fetchRelayInformation(relayURL);
  t.ok(Array.isArray(info.supported_nips), 'supported_nips is a list', info);
  for (const nip of [1, 9, 11, 40, 42, 45, 70]) {
    t.ok((info.supported_nips || []).includes(nip), `supported_nips has ${nip}`, info.supported_nips);
  }
  const res = await fetch(relayURL.replace(/^ws/, 'http'), { headers: { Accept: 'application/nostr+json' } });
  t.ok(res.headers.get('access-control-allow-origin'), 'NIP-11 response has Access-Control-Allow-Origin');
  t.ok((res.headers.get('content-type') || '').includes('application/nostr+json') || (res.headers.get('content-type') || '').includes('json'), 'NIP-11 content type is JSON', res.headers.get('content-type'));
});

test('publish gets OK true and the stored event comes back unchanged', async (t) => {
  const relay = await connect();
  const u = newUser();
  const e = u.event({ content: 'hello fleetmesh', tags: [['t', 'e2e'], ['client', 'nostr-tools']] });
  const r = await publish(relay, e);
  t.ok(r.ok, 'OK true', r);
  const got = await query(relay, [{ ids: [e.id] }]);
  t.equal(got, [e], 'REQ by id returns the event');
  relay.close();
});

test('duplicate publish is OK true with duplicate:', async (t) => {
  const relay = await connect();
  const e = newUser().event({ content: 'twice' });
  t.ok((await publish(relay, e)).ok, 'first publish OK true');
  const again = await publish(relay, e);
  t.ok(again.ok, 'second publish OK true', again);
  expectPrefix(t, again.message, 'duplicate:', 'duplicate');
  relay.close();
});

test('bad signature, bad id and bad fields are refused with invalid:', async (t) => {
  const relay = await RawClient.open();
  const u = newUser();
  const good = u.event({ content: 'original' });
  const cases = [
    ['tampered content', { ...good, content: 'changed' }],
    ['zeroed signature', { ...u.event({ content: 'x' }), sig: '0'.repeat(128) }],
    ['id not the hash', { ...u.event({ content: 'y' }), id: 'ab'.repeat(32) }],
    ['signature by another key', (() => { const o = newUser().event({ content: 'z' }); return { ...o, pubkey: u.pk }; })()],
    ['kind above 65535', u.event({ kind: 70000, content: 'kind out of range' })],
  ];
  for (const [name, ev] of cases) {
    relay.send(['EVENT', ev]);
    const ok = await relay.ok(ev.id);
    t.ok(ok && ok[2] === false, `${name}: OK false`, ok);
    if (ok) expectPrefix(t, ok[3], 'invalid:', name);
  }
  const q = await relay.req('chk', [{ authors: [u.pk] }]);
  t.equal(q.events, [], 'nothing from a refused event was stored');
  relay.close();
});

test('stored events: newest first, limit, since, until, kinds, tags, several filters, EOSE', async (t) => {
  const relay = await connect();
  const u = newUser();
  const base = now() - 1000;
  const evs = [];
  for (let i = 0; i < 6; i++) {
    const e = u.event({ kind: i % 2 ? 7 : 1, created_at: base + i * 10, content: 'n' + i, tags: [['t', i < 3 ? 'low' : 'high']] });
    evs.push(e);
    t.ok((await publish(relay, e)).ok, `publish ${i}`);
  }
  const ids = (list) => list.map((e) => e.id);
  const newestFirst = [...evs].reverse();
  t.equal(ids(await query(relay, [{ authors: [u.pk] }])), ids(newestFirst), 'authors: all, newest first');
  t.equal(ids(await query(relay, [{ authors: [u.pk], limit: 2 }])), ids(newestFirst.slice(0, 2)), 'limit 2: the two newest');
  t.equal(ids(await query(relay, [{ authors: [u.pk], since: base + 20, until: base + 40 }])), ids([evs[4], evs[3], evs[2]]), 'since/until inclusive');
  t.equal(ids(await query(relay, [{ authors: [u.pk], kinds: [7] }])), ids([evs[5], evs[3], evs[1]]), 'kinds');
  t.equal(ids(await query(relay, [{ authors: [u.pk], '#t': ['low'] }])), ids([evs[2], evs[1], evs[0]]), 'tag filter #t');
  t.equal(ids(await query(relay, [{ authors: [u.pk], '#t': ['low'], kinds: [1] }])), ids([evs[2], evs[0]]), 'tag and kind together');
  t.equal(ids(await query(relay, [{ authors: [u.pk], '#t': ['low', 'high'], kinds: [7] }])), ids([evs[5], evs[3], evs[1]]), 'several tag values: any matches');
  t.equal(await query(relay, [{ authors: [u.pk], '#t': ['none'] }]), [], 'tag value nobody used');
  const union = await query(relay, [{ ids: [evs[0].id, evs[5].id] }, { authors: [u.pk], kinds: [7] }]);
  t.equal([...new Set(ids(union))].sort(), ids([evs[0], evs[5], evs[3], evs[1]]).sort(), 'several filters: the union');
  t.equal(await query(relay, [{ authors: [newUser().pk] }]), [], 'no match: EOSE with no events');
  t.equal(await query(relay, [{ authors: [u.pk], since: base + 40, until: base + 10 }]), [], 'since after until: nothing');
  t.equal(ids(await query(relay, [{ authors: [u.pk], kinds: [1], limit: 1 }, { authors: [u.pk], kinds: [7], limit: 1 }])).sort(), ids([evs[4], evs[5]]).sort(), 'limit applies per filter');
  relay.close();
});

test('live subscription receives matching events after EOSE, not others', async (t) => {
  const sub = await connect();
  const pub = await connect();
  const u = newUser();
  const other = newUser();
  const state = live(sub, [{ authors: [u.pk], kinds: [1] }]);
  await state.eosePromise;
  t.ok(state.eose, 'EOSE received before any live event', state.closedReason);
  const wrongKind = u.event({ kind: 7, content: 'not for you' });
  const wrongAuthor = other.event({ content: 'not for you either' });
  const match = u.event({ content: 'for you' });
  for (const e of [wrongKind, wrongAuthor, match]) t.ok((await publish(pub, e)).ok, 'publish');
  await pollUntil(() => state.events.length > 0, 10000);
  t.equal(state.events.map((e) => e.id), [match.id], 'only the matching event arrives live');
  sub.close();
  pub.close();
});

test('REQ with an open subscription id replaces its filters', async (t) => {
  const c = await RawClient.open();
  const a = newUser();
  const b = newUser();
  const r1 = await c.req('same', [{ authors: [a.pk] }]);
  t.ok(r1.end && r1.end[0] === 'EOSE', 'EOSE for the first filters', r1.end);
  const r2 = await c.req('same', [{ authors: [b.pk] }]);
  t.ok(r2.end && r2.end[0] === 'EOSE', 'EOSE for the replacing filters', r2.end);
  const pub = await connect();
  const ea = a.event({ content: 'for the old filter' });
  const eb = b.event({ content: 'for the new filter' });
  t.ok((await publish(pub, ea)).ok, 'publish a');
  t.ok((await publish(pub, eb)).ok, 'publish b');
  const got = await c.next((m) => m[0] === 'EVENT' && m[1] === 'same');
  t.ok(got && got[2].id === eb.id, 'the new filter matches', got);
  t.ok(!c.messages.some((m) => m[0] === 'EVENT' && m[2].id === ea.id), 'the old filter no longer does', c.messages);
  pub.close();
  c.close();
});

test('CLOSE stops a subscription', async (t) => {
  const c = await RawClient.open();
  const u = newUser();
  const r1 = await c.req('first', [{ authors: [u.pk] }]);
  t.ok(r1.end && r1.end[0] === 'EOSE', 'EOSE for first', r1.end);
  c.send(['CLOSE', 'first']);
  const r2 = await c.req('second', [{ authors: [u.pk] }]);
  t.ok(r2.end && r2.end[0] === 'EOSE', 'EOSE for second', r2.end);
  const pub = await connect();
  const e = u.event({ content: 'after close' });
  t.ok((await publish(pub, e)).ok, 'publish');
  const got = await c.next((m) => m[0] === 'EVENT' && m[1] === 'second');
  t.ok(got && got[2].id === e.id, 'open subscription gets the event', got);
  t.ok(!c.messages.some((m) => m[0] === 'EVENT' && m[1] === 'first'), 'closed subscription got nothing', c.messages);
  pub.close();
  c.close();
});

test('content and tags needing JSON escapes survive (canonical serialization agrees with nostr-tools)', async (t) => {
  const relay = await connect();
  const u = newUser();
  const tricky = [
    'line\nbreak, tab\t, cr\r, quote " and backslash \\',
    'control \u0001\u001f, backspace \b, formfeed \f, nul-free',
    'html <b>&amp;</b> and \u2028 line separator \u2029 paragraph',
    'emoji 🎉🧪, CJK 中文, combining é, astral 𝄞',
  ];
  for (const content of tricky) {
    const e = u.event({ content, tags: [['t', content], ['x', '', '']] });
    const r = await publish(relay, e);
    t.ok(r.ok, 'accepted: ' + JSON.stringify(content), r);
    t.equal(await query(relay, [{ ids: [e.id] }]), [e], 'served unchanged: ' + JSON.stringify(content));
  }
  relay.close();
});

test('limit 0: EOSE with no stored events, then live events', async (t) => {
  const relay = await connect();
  const u = newUser();
  const old = u.event({ content: 'stored before' });
  t.ok((await publish(relay, old)).ok, 'publish');
  const state = live(relay, [{ authors: [u.pk], limit: 0 }]);
  await state.eosePromise;
  t.equal(state.events, [], 'no stored events before EOSE');
  const fresh = u.event({ content: 'live after' });
  t.ok((await publish(relay, fresh)).ok, 'publish live');
  await pollUntil(() => state.events.length > 0, 10000);
  t.equal(state.events.map((e) => e.id), [fresh.id], 'live event delivered');
  relay.close();
});

test('far-future created_at and AUTH events sent as EVENT are refused', async (t) => {
  const relay = await connect();
  const u = newUser();
  const future = u.event({ created_at: now() + 86400, content: 'from tomorrow' });
  const r = await publish(relay, future);
  t.ok(!r.ok, 'far-future event refused', r);
  expectPrefix(t, r.message, 'invalid:', 'far-future event');
  const authAsEvent = u.event({ kind: 22242, tags: [['relay', 'ws://x'], ['challenge', 'c']] });
  const a = await publish(relay, authAsEvent);
  t.ok(!a.ok, 'kind 22242 as EVENT refused', a);
  expectPrefix(t, a.message, ['invalid:', 'blocked:', 'restricted:'], 'kind 22242 as EVENT');
  t.equal(await query(relay, [{ ids: [future.id, authAsEvent.id] }]), [], 'neither stored');
  relay.close();
});

await run();
