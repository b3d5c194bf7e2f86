// The app's local state in IndexedDB (idb): the events of those followed
// (a bounded local copy, pruned oldest first), the outbox of signed notes
// not yet acknowledged by the home node, and small settings (the Nostr
// key when no NIP-07 signer is used, follows, catch-up progress).
// Shared by the page and the service worker.
import { openDB } from 'idb';

export const DB_NAME = 'fleetmesh-app';

// MAX_STORE_BYTES bounds the local copy of events: past it the oldest
// notes are dropped (spec/web.md, spec/limits.md).
export const MAX_STORE_BYTES = 8 << 20;

let dbp;
export function db() {
  dbp ??= openDB(DB_NAME, 1, {
    upgrade(d) {
      const ev = d.createObjectStore('events', { keyPath: 'id' });
      ev.createIndex('created_at', 'created_at');
      ev.createIndex('pubkey_kind', ['pubkey', 'kind']);
      d.createObjectStore('outbox', { keyPath: 'id' });
      d.createObjectStore('meta');
    },
  });
  return dbp;
}

export async function getMeta(key) {
  return (await db()).get('meta', key);
}

export async function setMeta(key, value) {
  return (await db()).put('meta', value, key);
}

// putEvents stores events, keeping one kind 0 and one kind 3 per author
// (the newest: they are replaceable) and adding each stored event's size
// to the running total the pruner reads. It returns how many were new.
export async function putEvents(events) {
  const d = await db();
  const tx = d.transaction(['events', 'meta'], 'readwrite');
  const st = tx.objectStore('events');
  let added = 0;
  let bytes = (await tx.objectStore('meta').get('bytes')) || 0;
  for (const ev of events) {
    if (await st.getKey(ev.id)) continue;
    if (ev.kind === 0 || ev.kind === 3) {
      const old = await st.index('pubkey_kind').getAll([ev.pubkey, ev.kind]);
      if (old.some((o) => o.created_at >= ev.created_at)) continue;
      for (const o of old) {
        await st.delete(o.id);
        bytes -= o.size || 0;
      }
    }
    const size = JSON.stringify(ev).length;
    await st.put({ ...ev, size });
    bytes += size;
    added++;
  }
  await tx.objectStore('meta').put(bytes, 'bytes');
  await tx.done;
  if (bytes > MAX_STORE_BYTES) await prune(bytes);
  return added;
}

// prune drops the oldest notes until the copy is within MAX_STORE_BYTES
// and a tenth under it, so it does not run again at every event, and
// records the oldest kept time as the floor catch-up starts from.
async function prune(bytes) {
  const d = await db();
  const tx = d.transaction(['events', 'meta'], 'readwrite');
  const target = MAX_STORE_BYTES * 0.9;
  let cur = await tx.objectStore('events').index('created_at').openCursor();
  let floor = 0;
  while (cur && bytes > target) {
    if (cur.value.kind === 1) {
      bytes -= cur.value.size || 0;
      floor = cur.value.created_at + 1;
      await cur.delete();
    }
    cur = await cur.continue();
  }
  await tx.objectStore('meta').put(bytes, 'bytes');
  await tx.objectStore('meta').put(floor, 'floor');
  await tx.done;
}

// eventsOf lists the stored events by the given authors and kinds, newest
// first, at most limit. One getAll of the bounded copy (MAX_STORE_BYTES)
// and a filter: a cursor costs a round to IndexedDB per event, which is
// what a cold, offline start would wait on.
export async function eventsOf(authors, kinds, limit = Infinity) {
  const want = new Set(authors);
  const all = await (await db()).getAll('events');
  return all
    .filter((e) => want.has(e.pubkey) && kinds.includes(e.kind))
    .sort(newestFirst)
    .slice(0, limit);
}

// newestFirst orders events as a reverse cursor on the created_at index
// walks them: newest first, and by id, descending, within a second.
const newestFirst = (a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

// firstScreen reads what the first screen of the feed needs, in one
// read-only transaction, without loading the whole copy: the follows and
// the cached Nostr public key (meta), the newest `limit` notes of those
// (a cursor walking the created_at index backwards, stopping there or
// after `scan` events, whichever comes first) and the profiles (kind 0)
// of their authors. The page paints these before it loads anything else
// (spec/web.md "First screen").
export async function firstScreen(limit, scan) {
  const tx = (await db()).transaction(['meta', 'events']);
  const meta = tx.objectStore('meta');
  const [follows, pubkey] = await Promise.all([meta.get('follows'), meta.get('nostr_pk')]);
  const want = new Set(follows || []);
  if (pubkey) want.add(pubkey);
  const events = tx.objectStore('events');
  const notes = [];
  let cur = want.size ? await events.index('created_at').openCursor(null, 'prev') : null;
  for (let seen = 0; cur && notes.length < limit && seen < scan; seen++) {
    if (cur.value.kind === 1 && want.has(cur.value.pubkey)) notes.push(cur.value);
    cur = await cur.continue();
  }
  const byKind = events.index('pubkey_kind');
  const profiles = await Promise.all([...new Set(notes.map((n) => n.pubkey))].map((pk) => byKind.get([pk, 0])));
  return { follows: follows || [], pubkey: pubkey || '', notes, profiles: profiles.filter(Boolean) };
}

export async function outboxAll() {
  return (await db()).getAll('outbox');
}
