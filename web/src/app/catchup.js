// Catch-up of the local copy with the home node: NIP-77 negentropy over
// the events of those followed (and one's own) since the pruning floor,
// then a REQ by id for what is missing; a plain since REQ when the relay
// answers NEG-ERR or lacks NIP-77 (spec/web.md).
import { eventsOf, getMeta, putEvents, setMeta } from './store.js';

// FEED_KINDS are what the local copy holds: profiles, notes, follows.
export const FEED_KINDS = [0, 1, 3];
// IDS_PER_REQ bounds one REQ by ids (spec/limits.md).
export const IDS_PER_REQ = 200;
// SINCE_SLACK_S reaches back before the last catch-up in the fallback, for
// events that arrived at the home late with older created_at.
export const SINCE_SLACK_S = 600;
// SINCE_PAGE, SINCE_PAGES: the fallback asks SINCE_PAGE events a REQ (a
// relay's usual max_limit) and at most SINCE_PAGES REQs a catch-up.
export const SINCE_PAGE = 500;
export const SINCE_PAGES = 20;

// catchUp brings the copy up to date with conn for authors and returns
// { method, missing, fetched }.
export async function catchUp(conn, authors) {
  const floor = (await getMeta('floor')) || 0;
  const filter = { kinds: FEED_KINDS, authors };
  if (floor) filter.since = floor;
  const started = Math.floor(Date.now() / 1000);
  let method = 'negentropy';
  let fetched = 0;
  let missing = 0;
  try {
    const local = (await eventsOf(authors, FEED_KINDS)).filter((e) => e.created_at >= floor);
    const need = await conn.reconcile(filter, local.map((e) => [e.created_at, e.id]));
    missing = need.length;
    await setMeta('behind', missing);
    for (let i = 0; i < need.length; i += IDS_PER_REQ) {
      const evs = await conn.query([{ ids: need.slice(i, i + IDS_PER_REQ) }]);
      fetched += await putEvents(evs);
      await setMeta('behind', Math.max(0, missing - i - IDS_PER_REQ));
    }
  } catch (e) {
    if (!conn.open) throw e;
    method = 'since';
    const last = (await getMeta('last_catchup')) || 0;
    const f = { ...filter, limit: SINCE_PAGE };
    if (last) f.since = Math.max(floor, last - SINCE_SLACK_S);
    // Paged back from now by until: a relay clamps a REQ's limit (500 by
    // default here), so one REQ may not bring all.
    for (let page = 0; page < SINCE_PAGES; page++) {
      const evs = await conn.query([f]);
      missing += evs.length;
      fetched += await putEvents(evs);
      if (evs.length < SINCE_PAGE) break;
      f.until = Math.min(...evs.map((e) => e.created_at)) - 1;
    }
  }
  await setMeta('behind', 0);
  await setMeta('last_catchup', started);
  await setMeta('last_method', method);
  return { method, missing, fetched };
}
