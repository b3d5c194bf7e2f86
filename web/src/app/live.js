// The live side of the page: the person's Nostr key, the home connection
// (catch-up, live subscription, outbox), the leaf (DIDComm: pairing,
// pickup, receipts) and the service worker's registration. main.jsx loads
// this module (a chunk of its own) only after the cached feed is painted:
// its code and the key work it does on open (secp256k1 and Ed25519
// public keys, the AES tables of @noble/ciphers) would otherwise stand
// between an offline open and the first screen (spec/web.md "First
// screen"). The network is used only while the page is visible ("wakes",
// as a phone leaf's).
import { catchUp, FEED_KINDS } from './catchup.js';
import { guard, nostrSigner } from './keys.js';
import { enqueue, flush } from './outbox.js';
import { homeRelayURL } from './home.js';
import { RelayConn } from './relay.js';
import { app, authors, refreshFeed, update } from './state.js';
import { getMeta, outboxAll, putEvents, setMeta } from './store.js';
import { idbStorage, Leaf, webCryptoKeyStore } from '../leaf/index.js';

export { guard };

// BASIC_MESSAGE is the DIDComm type of the messages people write here.
const BASIC_MESSAGE = 'https://didcomm.org/basicmessage/2.0/message';

// HIDDEN_CLOSE_MS: sockets are closed this long after the page is hidden
// (spec/web.md: none open 30 s after).
export const HIDDEN_CLOSE_MS = 25000;

async function refreshCounts() {
  const [outbox, behind, lastCatchup, method] = await Promise.all([
    outboxAll(), getMeta('behind'), getMeta('last_catchup'), getMeta('last_method'),
  ]);
  update({ outbox: outbox.length, behind: behind || 0, lastCatchup: lastCatchup || 0, method: method || '' });
}

// wake connects to the home, sends the outbox, catches up and keeps a live
// subscription while the page is visible and the browser online.
let waking = null;
export async function wake() {
  if (!navigator.onLine || document.visibilityState === 'hidden') return;
  if (waking) return waking;
  waking = (async () => {
    try {
      app.conn ??= new RelayConn(homeRelayURL(location));
      app.conn.onclose = () => { app.unsub = null; update({ online: false }); };
      await app.conn.connect();
      update({ online: true, error: '' });
      await flush(app.conn);
      await refreshCounts();
      const r = await catchUp(app.conn, authors());
      await refreshCounts();
      update({ lastResult: r });
      if (!app.unsub) {
        app.unsub = await app.conn.subscribe(
          [{ kinds: FEED_KINDS, authors: authors(), since: Math.floor(Date.now() / 1000) }],
          (ev) => putEvents([ev]).then(refreshFeed),
        );
      }
      fetchNode();
    } catch (e) {
      update({ online: !!app.conn?.open, error: String(e.message || e) });
    }
    // What the catch-up stored, also when it was cut short.
    await refreshFeed();
    await wakeLeaf();
    waking = null;
  })();
  return waking;
}

// withLeaf runs fn with the leaf under a Web Lock: one leaf operation per
// origin at a time, whichever tab runs it (spec/browser-leaf.md).
export function withLeaf(fn) {
  if (navigator.locks) return navigator.locks.request('fleetmesh-leaf', () => fn(app.leaf));
  return fn(app.leaf);
}

// wakeLeaf does the leaf protocol's wake with the home (DIDComm over
// HTTP): pairing with the node that served the app when there is no home
// yet, mediation, pickup, the DIDComm outbox and receipts.
export async function wakeLeaf() {
  if (!app.leaf) return;
  try {
    const summary = await withLeaf(async (leaf) => {
      if ((await leaf.homes()).length === 0) await leaf.pairWithNode(location.origin);
      return leaf.wake();
    });
    await refreshLeaf({ leafError: summary.error || '', leafSummary: summary });
  } catch (e) {
    await refreshLeaf({ leafError: String(e.message || e) });
  }
}

async function refreshLeaf(patch = {}) {
  const [homes, messages, receipts] = await Promise.all([app.leaf.homes(), app.leaf.messages(0, 100), app.leaf.receipts()]);
  update({ ...patch, homes, messages, receipts: receipts.length });
}

async function fetchNode() {
  try {
    const r = await fetch(new URL('node.json', location), { cache: 'no-store' });
    if (r.ok) {
      const n = await r.json();
      update({ peers: n.peers, home: n });
    }
  } catch {
    // offline: the last known home stays shown
  }
}

function sleep() {
  app.unsub = null;
  app.conn?.close();
  update({ online: false });
}

// publish signs a note (or profile, or follow list), keeps it in the
// outbox and sends it when it can: now if online, else on the next wake or
// on Background Sync.
export async function publish(template) {
  guard(JSON.stringify(template));
  const ev = await app.signer.sign({ created_at: Math.floor(Date.now() / 1000), tags: [], ...template });
  guard(JSON.stringify(ev));
  await enqueue(ev);
  await putEvents([ev]);
  await refreshFeed();
  await refreshCounts();
  const reg = await navigator.serviceWorker?.ready.catch(() => null);
  if (reg?.sync) await reg.sync.register('outbox').catch(() => {});
  if (navigator.onLine && app.conn?.open) {
    await flush(app.conn);
    await refreshCounts();
  } else wake();
  return ev;
}

// follow adds pk to those followed, publishes the follow list and
// restarts the live subscription with the new authors.
export async function follow(pk) {
  app.follows = [...new Set([...app.follows, pk])];
  await setMeta('follows', app.follows);
  refreshFeed();
  await publish({ kind: 3, content: '', tags: app.follows.map((p) => ['p', p]) });
  app.unsub?.();
  app.unsub = null;
  wake();
}

// sendBasicMessage queues a basic message to a DID (checked by the same
// guard as notes) and runs a leaf wake to send it; it returns its id.
export async function sendBasicMessage(to, text) {
  guard(text);
  const id = await withLeaf((leaf) => leaf.sendMessage(to, { type: BASIC_MESSAGE, body: { content: text } }));
  return id;
}

// start loads the key (caching its public key for the next first screen),
// opens the leaf, registers the service worker and wakes.
export async function start() {
  document.addEventListener('visibilitychange', () => {
    clearTimeout(app.hiddenTimer);
    if (document.visibilityState === 'hidden') app.hiddenTimer = setTimeout(sleep, HIDDEN_CLOSE_MS);
    else wake();
  });
  addEventListener('online', () => wake());
  addEventListener('offline', () => { sleep(); });

  const [signer] = await Promise.all([nostrSigner(), refreshCounts()]);
  app.signer = signer;
  if (signer.pubkey !== app.pubkey) {
    app.pubkey = signer.pubkey;
    await setMeta('nostr_pk', signer.pubkey);
    refreshFeed();
  }
  update({});
  try {
    const storage = await idbStorage();
    app.leaf = await Leaf.open({ storage, keyStore: webCryptoKeyStore(storage) });
    await refreshLeaf({ did: app.leaf.did });
    // A link carrying ?pair=CODE pairs with that home.
    const code = new URLSearchParams(location.search).get('pair');
    if (code) {
      await withLeaf((leaf) => leaf.pair(code));
      history.replaceState(null, '', location.pathname + location.hash);
    }
  } catch (e) {
    update({ leafError: String(e.message || e) });
  }
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register('sw.js', { scope: './' }).catch((e) => update({ error: `service worker: ${e.message}` }));
  }
  navigator.storage?.persist?.();
  document.body.dataset.ready = 'true';
  wake();
}
