// The page's shared state: what the views show (main.jsx) and what the
// live side (live.js: keys, the home connection, the leaf) changes. It is
// kept apart from both so the first screen needs none of the live side's
// code: only this, the store and Preact are loaded before the cached feed
// is painted (spec/web.md "First screen").
import { eventsOf } from './store.js';

// FEED_SHOWN bounds the notes the feed renders.
export const FEED_SHOWN = 200;

export const app = {
  conn: null,
  unsub: null,
  hiddenTimer: null,
  // signer is set by live.js once the key is loaded; pubkey (hex) is the
  // person's Nostr public key, cached in meta (`nostr_pk`) so the first
  // screen knows whose notes to show before any key is loaded.
  signer: null,
  pubkey: '',
  follows: [],
  listeners: new Set(),
  leaf: null,
  // feed: the notes shown, newest first, and the authors' profile names.
  feed: { notes: [], names: new Map() },
  status: { rev: 0, homes: [], messages: [], receipts: 0, leafError: '', online: false, lastCatchup: 0, method: '', behind: 0, outbox: 0, peers: null, home: null, error: '', did: '' },
};

// update changes the status and re-renders the views that read it.
export function update(patch) {
  Object.assign(app.status, patch, { rev: app.status.rev + 1 });
  for (const l of app.listeners) l();
}

// authors are the person and those followed: whose events the local copy
// holds and the feed shows.
export const authors = () => (app.pubkey ? [app.pubkey, ...app.follows.filter((f) => f !== app.pubkey)] : [...app.follows]);

// names maps each author to the name in their profile (kind 0).
export function names(profiles) {
  const m = new Map();
  for (const p of profiles) {
    try { m.set(p.pubkey, JSON.parse(p.content).name || ''); } catch { /* not JSON: no name */ }
  }
  return m;
}

// refreshFeed reads the feed (FEED_SHOWN notes and the profiles) from
// IndexedDB again and re-renders; called when events were stored or the
// authors changed. Calls while a read runs coalesce into one more read.
// It does not reject: a failed read is shown as the status's error.
let reading = null;
let again = false;
export function refreshFeed() {
  if (reading) {
    again = true;
    return reading;
  }
  reading = (async () => {
    do {
      again = false;
      try {
        const evs = await eventsOf(authors(), [0, 1]);
        app.feed = { notes: evs.filter((e) => e.kind === 1).slice(0, FEED_SHOWN), names: names(evs.filter((e) => e.kind === 0)) };
        update({});
      } catch (e) {
        update({ error: `reading the feed: ${e.message || e}` });
      }
    } while (again);
    reading = null;
  })();
  return reading;
}
