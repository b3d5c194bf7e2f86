// The browser leaf's page: feed of those followed, compose, profile names,
// identity and home node, status. State lives in IndexedDB (store.js) so
// the page shows the cached feed at once, online or not; the network is
// used only while the page is visible ("wakes", as a phone leaf's).
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { decode as nip19decode, npubEncode } from 'nostr-tools/nip19';
import { catchUp, FEED_KINDS } from './catchup.js';
import { guard, nostrSigner } from './keys.js';
import { enqueue, flush } from './outbox.js';
import { homeRelayURL, RelayConn } from './relay.js';
import { eventsOf, getMeta, outboxAll, putEvents, setMeta } from './store.js';
import { idbStorage, Leaf, webCryptoKeyStore } from '../leaf/index.js';

// BASIC_MESSAGE is the DIDComm type of the messages people write here.
const BASIC_MESSAGE = 'https://didcomm.org/basicmessage/2.0/message';

// HIDDEN_CLOSE_MS: sockets are closed this long after the page is hidden
// (spec/web.md: none open 30 s after).
export const HIDDEN_CLOSE_MS = 25000;
// FEED_SHOWN bounds the notes the feed renders.
export const FEED_SHOWN = 200;

const app = {
  conn: null,
  unsub: null,
  hiddenTimer: null,
  signer: null,
  follows: [],
  listeners: new Set(),
  leaf: null,
  status: { rev: 0, homes: [], messages: [], receipts: 0, leafError: '', online: false, lastCatchup: 0, method: '', behind: 0, outbox: 0, peers: null, home: null, error: '', did: '' },
};

// update changes the status and re-renders; rev counts the changes, so a
// view reading IndexedDB reads again after each.
function update(patch) {
  Object.assign(app.status, patch, { rev: app.status.rev + 1 });
  for (const l of app.listeners) l();
}

const authors = () => [app.signer.pubkey, ...app.follows.filter((f) => f !== app.signer.pubkey)];

async function refreshCounts() {
  const [outbox, behind, lastCatchup, method] = await Promise.all([
    outboxAll(), getMeta('behind'), getMeta('last_catchup'), getMeta('last_method'),
  ]);
  update({ outbox: outbox.length, behind: behind || 0, lastCatchup: lastCatchup || 0, method: method || '' });
}

// wake connects to the home, sends the outbox, catches up and keeps a live
// subscription while the page is visible and the browser online.
let waking = null;
async function wake() {
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
          (ev) => putEvents([ev]).then(() => update({})),
        );
      }
      fetchNode();
    } catch (e) {
      update({ online: !!app.conn?.open, error: String(e.message || e) });
    }
    await wakeLeaf();
    waking = null;
  })();
  return waking;
}

// withLeaf runs fn with the leaf under a Web Lock: one leaf operation per
// origin at a time, whichever tab runs it (spec/browser-leaf.md).
function withLeaf(fn) {
  if (navigator.locks) return navigator.locks.request('fleetmesh-leaf', () => fn(app.leaf));
  return fn(app.leaf);
}

// wakeLeaf does the leaf protocol's wake with the home (DIDComm over
// HTTP): pairing with the node that served the app when there is no home
// yet, mediation, pickup, the DIDComm outbox and receipts.
async function wakeLeaf() {
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

document.addEventListener('visibilitychange', () => {
  clearTimeout(app.hiddenTimer);
  if (document.visibilityState === 'hidden') app.hiddenTimer = setTimeout(sleep, HIDDEN_CLOSE_MS);
  else wake();
});
addEventListener('online', () => wake());
addEventListener('offline', () => { sleep(); });

// publish signs a note (or profile, or follow list), keeps it in the
// outbox and sends it when it can: now if online, else on the next wake or
// on Background Sync.
async function publish(template) {
  guard(JSON.stringify(template));
  const ev = await app.signer.sign({ created_at: Math.floor(Date.now() / 1000), tags: [], ...template });
  guard(JSON.stringify(ev));
  await enqueue(ev);
  await putEvents([ev]);
  await refreshCounts();
  const reg = await navigator.serviceWorker?.ready.catch(() => null);
  if (reg?.sync) await reg.sync.register('outbox').catch(() => {});
  if (navigator.onLine && app.conn?.open) {
    await flush(app.conn);
    await refreshCounts();
  } else wake();
  return ev;
}

function useApp() {
  const [, set] = useState(0);
  useEffect(() => {
    const l = () => set((n) => n + 1);
    app.listeners.add(l);
    return () => app.listeners.delete(l);
  }, []);
  return app.status;
}

function useEvents(kinds, limit) {
  const s = useApp();
  const [evs, setEvs] = useState([]);
  useEffect(() => { eventsOf(authors(), kinds, limit).then(setEvs); }, [s.rev]);
  return evs;
}

function names(profiles) {
  const m = new Map();
  for (const p of profiles) {
    try { m.set(p.pubkey, JSON.parse(p.content).name || ''); } catch { /* not JSON: no name */ }
  }
  return m;
}

const short = (pk) => npubEncode(pk).slice(0, 14) + '…';
const when = (t) => (t ? new Date(t * 1000).toLocaleString() : 'never');

function Feed() {
  const evs = useEvents([0, 1], Infinity);
  const notes = evs.filter((e) => e.kind === 1).slice(0, FEED_SHOWN);
  const nm = names(evs.filter((e) => e.kind === 0));
  // 'feed-shown' marks when the first notes are on the page (the
  // benchmark's offline second load reads it).
  useEffect(() => {
    if (notes.length && !performance.getEntriesByName('feed-shown').length) performance.mark('feed-shown');
  }, [notes.length]);
  return (
    <section aria-labelledby="feed-h">
      <h2 id="feed-h">Feed</h2>
      {notes.length === 0 && <p>No notes yet. Follow someone or write one.</p>}
      <ol class="feed">
        {notes.map((n) => (
          <li key={n.id} data-id={n.id}>
            <div class="who">{nm.get(n.pubkey) || short(n.pubkey)} <time>{when(n.created_at)}</time></div>
            <p class="note">{n.content}</p>
          </li>
        ))}
      </ol>
    </section>
  );
}

function Compose() {
  const [text, setText] = useState('');
  const [msg, setMsgText] = useState(['', 0]);
  const setMsg = (t) => setMsgText(([, n]) => [t, n + 1]);
  const submit = async (e) => {
    e.preventDefault();
    if (!text.trim()) return;
    try {
      const ev = await publish({ kind: 1, content: text });
      setText('');
      setMsg(`Queued ${ev.id.slice(0, 8)}: ${app.status.online ? 'sent' : 'will be sent when online'}.`);
    } catch (err) {
      setMsg(String(err.message || err));
    }
  };
  return (
    <section aria-labelledby="compose-h">
      <h2 id="compose-h">Compose</h2>
      <form onSubmit={submit}>
        <label for="note">Note</label>
        <textarea id="note" rows="4" value={text} onInput={(e) => setText(e.currentTarget.value)} />
        <button type="submit">Publish</button>
      </form>
      <p role="status" id="compose-msg" data-n={msg[1]}>{msg[0]}</p>
    </section>
  );
}

function Profile() {
  const [name, setName] = useState('');
  const [follow, setFollow] = useState('');
  const [msg, setMsg] = useState('');
  const saveName = async (e) => {
    e.preventDefault();
    try {
      await publish({ kind: 0, content: JSON.stringify({ name }) });
      setMsg('Name saved.');
    } catch (err) { setMsg(String(err.message || err)); }
  };
  const addFollow = async (e) => {
    e.preventDefault();
    try {
      let pk = follow.trim();
      if (pk.startsWith('npub1')) pk = nip19decode(pk).data;
      if (!/^[0-9a-f]{64}$/.test(pk)) throw new Error('give an npub1… or a 64-character hex public key');
      app.follows = [...new Set([...app.follows, pk])];
      await setMeta('follows', app.follows);
      await publish({ kind: 3, content: '', tags: app.follows.map((p) => ['p', p]) });
      setFollow('');
      setMsg('Following.');
      app.unsub?.();
      app.unsub = null;
      wake();
    } catch (err) { setMsg(String(err.message || err)); }
  };
  return (
    <section aria-labelledby="profile-h">
      <h2 id="profile-h">Profile</h2>
      <form onSubmit={saveName}>
        <label for="name">Your name</label>
        <input id="name" value={name} onInput={(e) => setName(e.currentTarget.value)} autocomplete="nickname" />
        <button type="submit">Save name</button>
      </form>
      <form onSubmit={addFollow}>
        <label for="follow">Follow (npub or hex public key)</label>
        <input id="follow" value={follow} onInput={(e) => setFollow(e.currentTarget.value)} />
        <button type="submit">Follow</button>
      </form>
      <p role="status">{msg}</p>
      <h3>Following</h3>
      <ul class="follows">{app.follows.map((f) => <li key={f}><code>{npubEncode(f)}</code></li>)}</ul>
    </section>
  );
}

function PairForm() {
  const [code, setCode] = useState('');
  const [msg, setMsg] = useState('');
  const pair = async (e) => {
    e.preventDefault();
    try {
      const h = await withLeaf((leaf) => leaf.pair(code.trim()));
      setCode('');
      setMsg(`Paired with ${h.did}.`);
      await wakeLeaf();
    } catch (err) { setMsg(String(err.message || err)); }
  };
  return (
    <form onSubmit={pair}>
      <label for="invite">Pair with another home (join code or invitation link)</label>
      <input id="invite" value={code} onInput={(e) => setCode(e.currentTarget.value)} placeholder="fmjoin1…" />
      <button type="submit">Pair</button>
      <p role="status">{msg}</p>
    </form>
  );
}

function Identity() {
  const s = useApp();
  return (
    <section aria-labelledby="id-h">
      <h2 id="id-h">Identity and home</h2>
      <dl>
        <dt>This device's DID</dt><dd><code id="did">{s.did || 'making…'}</code></dd>
        <dt>Nostr key</dt><dd><code id="npub">{npubEncode(app.signer.pubkey)}</code> ({app.signer.kind === 'nip07' ? 'browser signer' : 'kept on this device'})</dd>
        <dt>Home relay</dt><dd><code id="home-relay">{app.conn?.url || homeRelayURL(location)}</code></dd>
        <dt>Home DID</dt><dd><code id="home-did">{s.home?.did || 'unknown'}</code></dd>
        <dt>Paired homes (DIDComm)</dt>
        <dd><ul class="homes">{s.homes.map((h) => <li key={h.did}><code>{h.did}</code>{h.mediated ? ' (mediating)' : ''}</li>)}</ul>{s.homes.length === 0 && 'none yet'}</dd>
      </dl>
      <PairForm />
    </section>
  );
}

function Messages() {
  const s = useApp();
  const [to, setTo] = useState('');
  const [text, setText] = useState('');
  const [msg, setMsg] = useState('');
  const send = async (e) => {
    e.preventDefault();
    try {
      guard(text);
      const id = await withLeaf((leaf) => leaf.sendMessage(to.trim(), { type: BASIC_MESSAGE, body: { content: text } }));
      setText('');
      setMsg(`Queued ${id.slice(0, 8)}.`);
      await wakeLeaf();
      setMsg(`Sent ${id.slice(0, 8)}${app.status.leafError ? `; ${app.status.leafError}` : ''}.`);
    } catch (err) { setMsg(String(err.message || err)); }
  };
  return (
    <section aria-labelledby="msg-h">
      <h2 id="msg-h">Messages</h2>
      <ol class="feed messages">
        {s.messages.map((m) => (
          <li key={m.seq} data-from={m.from || ''}>
            <div class="who">{m.error ? 'unreadable' : (m.from || 'anonymous')}{m.authenticated ? '' : ' (not authenticated)'}</div>
            <p class="note">{m.error ? m.error : (m.message?.body?.content ?? m.message?.type)}</p>
          </li>
        ))}
      </ol>
      {s.messages.length === 0 && <p>No messages yet.</p>}
      <form onSubmit={send}>
        <label for="msg-to">To (DID)</label>
        <input id="msg-to" value={to} onInput={(e) => setTo(e.currentTarget.value)} placeholder="did:key:z6Mk…" />
        <label for="msg-text">Message</label>
        <textarea id="msg-text" rows="3" value={text} onInput={(e) => setText(e.currentTarget.value)} />
        <button type="submit">Send</button>
      </form>
      <p role="status" id="msg-status">{msg}</p>
    </section>
  );
}

function Status() {
  const s = useApp();
  const rows = [
    ['online', 'Connection', s.online ? 'online' : navigator.onLine ? 'offline (home not connected)' : 'offline'],
    ['last-catchup', 'Last catch-up', `${when(s.lastCatchup)}${s.method ? ` (${s.method})` : ''}`],
    ['behind', 'Behind by', s.behind ? `${s.behind} events` : 'caught up'],
    ['outbox', 'Outbox', `${s.outbox} waiting`],
    ['peers', "Home's mesh peers", s.peers == null ? 'unknown' : String(s.peers)],
    ['homes', 'Paired homes', String(s.homes.length)],
    ['messages', 'DIDComm messages', String(s.messages.length)],
    ['receipts', 'Receipts with homes', String(s.receipts)],
  ];
  return (
    <section aria-labelledby="status-h">
      <h2 id="status-h">Status</h2>
      <dl class="status">
        {rows.map(([k, label, v]) => <><dt key={k}>{label}</dt><dd data-status={k}>{v}</dd></>)}
      </dl>
      {s.error && <p role="alert" class="error">{s.error}</p>}
      {s.leafError && <p role="alert" class="error">DIDComm: {s.leafError}</p>}
    </section>
  );
}

const VIEWS = { feed: ['Feed', Feed], compose: ['Compose', Compose], profile: ['Profile', Profile], messages: ['Messages', Messages], identity: ['Identity', Identity], status: ['Status', Status] };

function App() {
  const s = useApp();
  const [view, setView] = useState(location.hash.slice(1) in VIEWS ? location.hash.slice(1) : 'feed');
  useEffect(() => {
    const h = () => setView(location.hash.slice(1) in VIEWS ? location.hash.slice(1) : 'feed');
    addEventListener('hashchange', h);
    return () => removeEventListener('hashchange', h);
  }, []);
  const V = VIEWS[view][1];
  return (
    <>
      <header>
        <h1>fleetmesh</h1>
        <span class={`dot ${s.online ? 'on' : 'off'}`} id="online" aria-live="polite">{s.online ? 'online' : 'offline'}</span>
      </header>
      <nav aria-label="Views">
        {Object.entries(VIEWS).map(([k, [label]]) => (
          <a key={k} href={`#${k}`} aria-current={k === view ? 'page' : undefined}>{label}</a>
        ))}
      </nav>
      <main id="view" data-view={view}><V /></main>
    </>
  );
}

async function start() {
  const [signer, follows] = await Promise.all([nostrSigner(), getMeta('follows'), refreshCounts()]);
  app.signer = signer;
  app.follows = follows || [];
  const root = document.getElementById('app');
  root.textContent = '';
  render(<App />, root);
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

start();
