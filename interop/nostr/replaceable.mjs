// NIP-01 storage rules for replaceable (0, 3, 10000-19999) and addressable
// (30000-39999, keyed by the d tag) events, with nostr-tools.
import { test, run, newUser, now, connect, publish, query } from './harness.mjs';

for (const kind of [0, 3, 10002]) {
  test(`kind ${kind}: newest replaces, older never does`, async (t) => {
    const relay = await connect();
    const u = newUser();
    const base = now() - 100;
    const v1 = u.event({ kind, created_at: base, content: kind === 0 ? '{"name":"v1"}' : '', tags: kind === 3 ? [['p', newUser().pk]] : [] });
    const v2 = u.event({ kind, created_at: base + 10, content: kind === 0 ? '{"name":"v2"}' : '', tags: kind === 10002 ? [['r', 'wss://relay.example.org']] : [] });
    const old = u.event({ kind, created_at: base - 50, content: kind === 0 ? '{"name":"old"}' : 'old' });
    t.ok((await publish(relay, v1)).ok, 'publish v1');
    t.ok((await publish(relay, v2)).ok, 'publish v2');
    t.equal((await query(relay, [{ authors: [u.pk], kinds: [kind] }])).map((e) => e.id), [v2.id], 'only v2 stored');
    await publish(relay, old); // OK true or false are both allowed; it must not win.
    t.equal((await query(relay, [{ authors: [u.pk], kinds: [kind] }])).map((e) => e.id), [v2.id], 'older event did not replace v2');
    t.equal(await query(relay, [{ ids: [v1.id] }]), [], 'v1 is gone, also by id');
    relay.close();
  });
}

test('replaceable tie on created_at: the lowest id is kept', async (t) => {
  const relay = await connect();
  const u = newUser();
  const ts = now() - 30;
  const a = u.event({ kind: 10000, created_at: ts, content: 'a' });
  const b = u.event({ kind: 10000, created_at: ts, content: 'b' });
  const [low, high] = a.id < b.id ? [a, b] : [b, a];
  await publish(relay, low);
  await publish(relay, high);
  t.equal((await query(relay, [{ authors: [u.pk], kinds: [10000] }])).map((e) => e.id), [low.id], 'lowest id kept (high published last)');
  const u2 = newUser();
  const c = u2.event({ kind: 10000, created_at: ts, content: 'c' });
  const d = u2.event({ kind: 10000, created_at: ts, content: 'd' });
  const [low2, high2] = c.id < d.id ? [c, d] : [d, c];
  await publish(relay, high2);
  await publish(relay, low2);
  t.equal((await query(relay, [{ authors: [u2.pk], kinds: [10000] }])).map((e) => e.id), [low2.id], 'lowest id kept (low published last)');
  relay.close();
});

test('replaceable events of different authors do not replace each other', async (t) => {
  const relay = await connect();
  const a = newUser();
  const b = newUser();
  const ea = a.event({ kind: 0, content: '{"name":"a"}' });
  const eb = b.event({ kind: 0, content: '{"name":"b"}' });
  t.ok((await publish(relay, ea)).ok, 'publish a');
  t.ok((await publish(relay, eb)).ok, 'publish b');
  const got = (await query(relay, [{ authors: [a.pk, b.pk], kinds: [0] }])).map((e) => e.id).sort();
  t.equal(got, [ea.id, eb.id].sort(), 'both kept');
  relay.close();
});

test('addressable: replaced per (author, kind, d tag)', async (t) => {
  const relay = await connect();
  const u = newUser();
  const base = now() - 100;
  const a1 = u.event({ kind: 30023, created_at: base, tags: [['d', 'a']], content: 'a v1' });
  const a2 = u.event({ kind: 30023, created_at: base + 5, tags: [['d', 'a']], content: 'a v2' });
  const b1 = u.event({ kind: 30023, created_at: base + 1, tags: [['d', 'b']], content: 'b v1' });
  const other = u.event({ kind: 30024, created_at: base + 2, tags: [['d', 'a']], content: 'other kind' });
  const noD1 = u.event({ kind: 30023, created_at: base + 3, content: 'no d v1' });
  const noD2 = u.event({ kind: 30023, created_at: base + 4, tags: [['d', '']], content: 'empty d v2' });
  const aOld = u.event({ kind: 30023, created_at: base - 10, tags: [['d', 'a']], content: 'a old' });
  for (const e of [a1, a2, b1, other, noD1, noD2]) t.ok((await publish(relay, e)).ok, 'publish ' + e.content);
  await publish(relay, aOld);
  const got = (await query(relay, [{ authors: [u.pk], kinds: [30023] }])).map((e) => e.content);
  t.equal(got.sort(), ['a v2', 'b v1', 'empty d v2'].sort(), 'one event per d tag; missing d equals empty d');
  t.equal((await query(relay, [{ authors: [u.pk], kinds: [30023], '#d': ['a'] }])).map((e) => e.id), [a2.id], '#d filter finds the latest');
  t.equal((await query(relay, [{ authors: [u.pk], kinds: [30024] }])).map((e) => e.id), [other.id], 'other kind untouched');
  relay.close();
});

test('kind range boundaries: 9999, 19999, 20000, 29999, 30000, 39999, 40000', async (t) => {
  const relay = await connect();
  const u = newUser();
  const base = now() - 100;
  const twice = async (kind, tags = []) => {
    const a = u.event({ kind, created_at: base, tags, content: 'first' });
    const b = u.event({ kind, created_at: base + 1, tags, content: 'second' });
    t.ok((await publish(relay, a)).ok, `publish ${kind} first`);
    t.ok((await publish(relay, b)).ok, `publish ${kind} second`);
    return (await query(relay, [{ authors: [u.pk], kinds: [kind] }])).map((e) => e.content);
  };
  t.equal(await twice(9999), ['second', 'first'], 'kind 9999 is regular: both kept');
  t.equal(await twice(19999), ['second'], 'kind 19999 is replaceable');
  t.equal(await twice(20000), [], 'kind 20000 is ephemeral: none stored');
  t.equal(await twice(29999), [], 'kind 29999 is ephemeral: none stored');
  t.equal(await twice(30000, [['d', 'x']]), ['second'], 'kind 30000 is addressable');
  t.equal(await twice(39999, [['d', 'x']]), ['second'], 'kind 39999 is addressable');
  t.equal(await twice(40000, [['d', 'x']]), ['second', 'first'], 'kind 40000 is regular: both kept');
  relay.close();
});

await run();
