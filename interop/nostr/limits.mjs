// Each configured limit's refusal, and oversized messages that must not
// disturb anyone else. Limits come from options (the node's config):
// maxEventBytes, maxContentBytes, maxTags, maxFilters, maxSubscriptions,
// maxLimit, defaultLimit, maxMessageBytes.
import { test, run, options, newUser, now, connect, publish, query, live, pollUntil, expectPrefix, RawClient } from './harness.mjs';

test('event larger than max_event_bytes: OK false invalid:', async (t) => {
  const relay = await connect();
  const u = newUser();
  const big = u.event({ content: 'x'.repeat(options.maxEventBytes + 100) });
  t.ok(JSON.stringify(['EVENT', big]).length < options.maxMessageBytes, 'test event fits in a message');
  const r = await publish(relay, big);
  t.ok(!r.ok, 'OK false', r);
  expectPrefix(t, r.message, 'invalid:', 'event too large');
  const small = u.event({ content: 'x'.repeat(100) });
  t.ok((await publish(relay, small)).ok, 'a small event on the same connection is fine');
  relay.close();
});

test('more than max_tags tags: OK false invalid:; exactly max_tags is fine', async (t) => {
  const relay = await connect();
  const u = newUser();
  const tags = (n) => Array.from({ length: n }, (_, i) => ['t', 'tag' + i]);
  const over = u.event({ tags: tags(options.maxTags + 1) });
  const r = await publish(relay, over);
  t.ok(!r.ok, 'OK false', r);
  expectPrefix(t, r.message, 'invalid:', 'too many tags');
  const at = await publish(relay, u.event({ tags: tags(options.maxTags) }));
  t.ok(at.ok, 'max_tags tags accepted', at);
  relay.close();
});

test('content longer than max_content_bytes: OK false invalid:', async (t) => {
  const relay = await connect();
  const u = newUser();
  const e = u.event({ content: 'c'.repeat(options.maxContentBytes + 1) });
  t.ok(JSON.stringify(e).length < options.maxEventBytes, 'the event itself is within max_event_bytes');
  const r = await publish(relay, e);
  t.ok(!r.ok, 'OK false', r);
  expectPrefix(t, r.message, 'invalid:', 'content too long');
  relay.close();
});

test('COUNT with more than max_filters filters: CLOSED invalid:', async (t) => {
  const c = await RawClient.open();
  c.send(['COUNT', 'cnt', ...Array.from({ length: options.maxFilters + 1 }, (_, i) => ({ kinds: [i] }))]);
  const m = await c.next((x) => x[1] === 'cnt');
  t.ok(m && m[0] === 'CLOSED', 'CLOSED', m);
  if (m && m[0] === 'CLOSED') expectPrefix(t, m[2], 'invalid:', 'COUNT with too many filters');
  c.close();
});

test('more than max_filters filters: CLOSED invalid:', async (t) => {
  const c = await RawClient.open();
  const filters = (n) => Array.from({ length: n }, (_, i) => ({ kinds: [i] }));
  const over = await c.req('many', filters(options.maxFilters + 1));
  t.ok(over.end && over.end[0] === 'CLOSED', 'CLOSED', over.end);
  if (over.end) expectPrefix(t, over.end[2], 'invalid:', 'too many filters');
  const at = await c.req('enough', filters(options.maxFilters));
  t.ok(at.end && at.end[0] === 'EOSE', 'max_filters filters: EOSE', at.end);
  c.close();
});

test('more than max_subscriptions open subscriptions: CLOSED rate-limited: or blocked:', async (t) => {
  const c = await RawClient.open();
  for (let i = 0; i < options.maxSubscriptions; i++) {
    const r = await c.req('s' + i, [{ kinds: [1], authors: [newUser().pk] }]);
    t.ok(r.end && r.end[0] === 'EOSE', `subscription ${i} open`, r.end);
  }
  const again = await c.req('s1', [{ kinds: [7] }]);
  t.ok(again.end && again.end[0] === 'EOSE', 'reusing an open subscription id replaces it, not counted twice', again.end);
  const over = await c.req('one-too-many', [{ kinds: [1] }]);
  t.ok(over.end && over.end[0] === 'CLOSED', 'CLOSED', over.end);
  if (over.end) expectPrefix(t, over.end[2], ['rate-limited:', 'blocked:'], 'too many subscriptions');
  c.send(['CLOSE', 's0']);
  const after = await c.req('after-close', [{ kinds: [1], authors: [newUser().pk] }]);
  t.ok(after.end && after.end[0] === 'EOSE', 'after CLOSE a new subscription fits', after.end);
  c.close();
});

test('limit is clamped to max_limit, absent limit is default_limit', async (t) => {
  const relay = await connect();
  const u = newUser();
  const base = now() - 100;
  const evs = [];
  for (let i = 0; i < options.maxLimit + 3; i++) {
    const e = u.event({ created_at: base + i, content: 'n' + i });
    evs.push(e);
    t.ok((await publish(relay, e)).ok, 'publish');
  }
  const newest = [...evs].reverse();
  const got = await query(relay, [{ authors: [u.pk], limit: 1000 }]);
  t.equal(got.map((e) => e.id), newest.slice(0, options.maxLimit).map((e) => e.id), 'the max_limit newest');
  const noLimit = await query(relay, [{ authors: [u.pk] }]);
  t.equal(noLimit.map((e) => e.id), newest.slice(0, options.defaultLimit).map((e) => e.id), 'no limit: the default_limit newest');
  relay.close();
});

test('a message larger than max_message_bytes is refused and disturbs no one else', async (t) => {
  const watcher = await connect();
  const u = newUser();
  const state = live(watcher, [{ authors: [u.pk] }]);
  await state.eosePromise;
  const c = await RawClient.open();
  const big = u.event({ content: 'y'.repeat(options.maxMessageBytes + 1000) });
  c.send(['EVENT', big]);
  // The relay may answer with a NOTICE and keep the connection, or close it.
  const notice = await c.next((m) => m[0] === 'NOTICE' || (m[0] === 'OK' && m[1] === big.id), 10000);
  t.ok(notice || c.isClosed, 'oversized message answered (NOTICE) or its connection closed', c.messages);
  if (notice && notice[0] === 'NOTICE') expectPrefix(t, notice[1], 'invalid:', 'oversized message NOTICE');
  t.ok(!notice || notice[0] !== 'OK' || notice[2] === false, 'oversized event not accepted', notice);
  if (!c.isClosed) {
    const r = await c.req('after-big', [{ ids: [big.id] }]);
    t.ok(r.end && r.end[0] === 'EOSE' && r.events.length === 0, 'connection still usable, event not stored', r);
  }
  const pub = await connect();
  const e = u.event({ content: 'still alive' });
  t.ok((await publish(pub, e)).ok, 'others can still publish');
  await pollUntil(() => state.events.length > 0, 10000);
  t.equal(state.events.map((x) => x.id), [e.id], 'other clients\' subscriptions are undisturbed');
  c.close();
  watcher.close();
  pub.close();
});

test('a message far over max_message_bytes closes only that connection', async (t) => {
  const watcher = await connect();
  const u = newUser();
  const state = live(watcher, [{ authors: [u.pk] }]);
  await state.eosePromise;
  const c = await RawClient.open();
  c.send(['EVENT', u.event({ content: 'z'.repeat(options.maxMessageBytes * 16) })]);
  const closed = await Promise.race([c.closed, new Promise((r) => setTimeout(() => r(null), 10000))]);
  t.ok(closed, 'connection closed by the relay');
  const pub = await connect();
  const e = u.event({ content: 'still alive after a huge frame' });
  t.ok((await publish(pub, e)).ok, 'others can still publish');
  await pollUntil(() => state.events.length > 0, 10000);
  t.equal(state.events.map((x) => x.id), [e.id], 'other clients\' subscriptions are undisturbed');
  watcher.close();
  pub.close();
});

await run();
