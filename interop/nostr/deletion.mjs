// NIP-09 deletion requests by e tag and by a tag, with nostr-tools.
import { test, run, newUser, now, connect, publish, query } from './harness.mjs';

test('deletion by e tag removes the author\'s event, keeps the rest', async (t) => {
  const relay = await connect();
  const u = newUser();
  const e1 = u.event({ content: 'delete me' });
  const e2 = u.event({ content: 'keep me' });
  t.ok((await publish(relay, e1)).ok, 'publish e1');
  t.ok((await publish(relay, e2)).ok, 'publish e2');
  const del = u.event({ kind: 5, tags: [['e', e1.id], ['k', '1']], content: 'oops' });
  t.ok((await publish(relay, del)).ok, 'publish deletion');
  t.equal(await query(relay, [{ ids: [e1.id] }]), [], 'e1 gone');
  t.equal((await query(relay, [{ ids: [e2.id] }])).map((e) => e.id), [e2.id], 'e2 kept');
  t.equal((await query(relay, [{ authors: [u.pk], kinds: [5] }])).map((e) => e.id), [del.id], 'the deletion request is stored and served');
  await publish(relay, e1);
  t.equal(await query(relay, [{ ids: [e1.id] }]), [], 'a deleted event published again is not served');
  relay.close();
});

test('a deletion by someone else deletes nothing', async (t) => {
  const relay = await connect();
  const u = newUser();
  const mallory = newUser();
  const e = u.event({ content: 'mine' });
  t.ok((await publish(relay, e)).ok, 'publish');
  await publish(relay, mallory.event({ kind: 5, tags: [['e', e.id]] }));
  t.equal((await query(relay, [{ ids: [e.id] }])).map((x) => x.id), [e.id], 'still there');
  relay.close();
});

test('deletion by a tag removes addressable versions up to its created_at', async (t) => {
  const relay = await connect();
  const u = newUser();
  const base = now() - 100;
  const v = u.event({ kind: 30001, created_at: base, tags: [['d', 'list']], content: 'v' });
  const keep = u.event({ kind: 30001, created_at: base, tags: [['d', 'other']], content: 'other list' });
  t.ok((await publish(relay, v)).ok, 'publish addressable');
  t.ok((await publish(relay, keep)).ok, 'publish other d');
  const del = u.event({ kind: 5, created_at: base + 10, tags: [['a', `30001:${u.pk}:list`]] });
  t.ok((await publish(relay, del)).ok, 'publish deletion');
  t.equal(await query(relay, [{ authors: [u.pk], kinds: [30001], '#d': ['list'] }]), [], 'addressable deleted');
  t.equal((await query(relay, [{ authors: [u.pk], kinds: [30001], '#d': ['other'] }])).map((e) => e.id), [keep.id], 'other d tag kept');
  const older = u.event({ kind: 30001, created_at: base + 5, tags: [['d', 'list']], content: 'older than deletion' });
  await publish(relay, older);
  t.equal(await query(relay, [{ authors: [u.pk], kinds: [30001], '#d': ['list'] }]), [], 'a version older than the deletion is not served');
  const newer = u.event({ kind: 30001, created_at: base + 20, tags: [['d', 'list']], content: 'newer than deletion' });
  t.ok((await publish(relay, newer)).ok, 'a version newer than the deletion is accepted');
  t.equal((await query(relay, [{ authors: [u.pk], kinds: [30001], '#d': ['list'] }])).map((e) => e.id), [newer.id], 'and served');
  relay.close();
});

test('an a-tag deletion naming someone else\'s address deletes nothing', async (t) => {
  const relay = await connect();
  const u = newUser();
  const mallory = newUser();
  const v = u.event({ kind: 30001, tags: [['d', 'mine']], content: 'mine' });
  t.ok((await publish(relay, v)).ok, 'publish');
  await publish(relay, mallory.event({ kind: 5, tags: [['a', `30001:${u.pk}:mine`]] }));
  t.equal((await query(relay, [{ ids: [v.id] }])).map((e) => e.id), [v.id], 'still there');
  relay.close();
});

test('a-tag deletion of a d tag that contains colons', async (t) => {
  const relay = await connect();
  const u = newUser();
  const base = now() - 100;
  const v = u.event({ kind: 30023, created_at: base, tags: [['d', 'a:b:c']], content: 'colons in d' });
  const other = u.event({ kind: 30023, created_at: base, tags: [['d', 'a']], content: 'prefix of the d' });
  t.ok((await publish(relay, v)).ok, 'publish');
  t.ok((await publish(relay, other)).ok, 'publish other');
  t.ok((await publish(relay, u.event({ kind: 5, created_at: base + 10, tags: [['a', `30023:${u.pk}:a:b:c`]] }))).ok, 'publish deletion');
  t.equal(await query(relay, [{ ids: [v.id] }]), [], 'the event with d "a:b:c" is deleted');
  t.equal((await query(relay, [{ ids: [other.id] }])).map((e) => e.id), [other.id], 'd "a" is not');
  relay.close();
});

await run();
