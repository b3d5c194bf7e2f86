// The outbox: notes signed at compose time and kept in IndexedDB until the
// home node acknowledges them (OK true, or duplicate), so a note written
// offline survives a reload and is sent when the app is back online. The
// page and the service worker (Background Sync) both flush it; a Web Lock
// makes them take turns, and an entry leaves the outbox only on the
// relay's OK, so a note is stored once however often a flush is cut
// short (the event id is fixed at signing: a resend is a duplicate).
import { db, outboxAll } from './store.js';

export async function enqueue(ev) {
  await (await db()).put('outbox', { id: ev.id, event: ev, queued: Date.now() });
}

async function withLock(fn) {
  if (globalThis.navigator?.locks) return navigator.locks.request('fleetmesh-outbox', fn);
  return fn();
}

// flush sends every queued note over conn and removes the acknowledged
// ones; it returns { sent, refused, left }. A note the relay refuses for
// good (OK false with a reason other than rate-limited or error) is moved
// to 'refused' in the entry and kept for the person to see.
export async function flush(conn) {
  return withLock(async () => {
    let sent = 0;
    let refused = 0;
    for (const item of await outboxAll()) {
      if (item.refused) continue;
      const [ok, reason] = await conn.publish(item.event);
      const d = await db();
      if (ok) {
        await d.delete('outbox', item.id);
        sent++;
      } else if (!/^(rate-limited|error):/.test(reason)) {
        await d.put('outbox', { ...item, refused: reason });
        refused++;
      }
    }
    return { sent, refused, left: (await outboxAll()).length };
  });
}
