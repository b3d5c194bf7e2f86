// The browser leaf's page: feed of those followed, compose, profile names,
// identity and home node, status. It paints the first screen of the
// cached feed before anything else (spec/web.md "First screen"): one read
// of IndexedDB (store.js firstScreen) and Preact, then it loads the rest
// of the feed and the live side (live.js: keys, the home connection, the
// leaf) as a separate chunk. State lives in IndexedDB (store.js) so the
// page shows the cached feed at once, online or not.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { decode as nip19decode, npubEncode } from 'nostr-tools/nip19';
import { app, names, refreshFeed, update } from './state.js';
import { homeRelayURL } from './home.js';
import { firstScreen } from './store.js';

// FIRST_SCREEN is how many notes the first paint shows: a tall screen's
// worth; the rest (to FEED_SHOWN) follow once it is painted.
// FIRST_SCREEN_SCAN bounds the events its cursor looks at to find them
// (others' events, profiles and follow lists are passed over).
export const FIRST_SCREEN = 20;
export const FIRST_SCREEN_SCAN = 200;

// live resolves to the live side (live.js) once it has started; the views
// that sign, send or pair wait for it.
let liveP = null;
const live = () => (liveP ??= import('./live.js').then(async (m) => {
  await m.start();
  return m;
}));

function useApp() {
  const [, set] = useState(0);
  useEffect(() => {
    const l = () => set((n) => n + 1);
    app.listeners.add(l);
    return () => app.listeners.delete(l);
  }, []);
  return app.status;
}

// short is the start of an author's npub, for authors without a name;
// computed once per author (bech32 in a loop of 200 notes adds up).
const shortOf = new Map();
function short(pk) {
  let s = shortOf.get(pk);
  if (!s) shortOf.set(pk, (s = npubEncode(pk).slice(0, 14) + '…'));
  return s;
}

// when shows a time as local YYYY-MM-DD HH:MM:SS, from Date's getters,
// with seconds as toLocaleString had them (the status view's last
// catch-up changes with each one). Not with Intl or toLocaleString: a
// page's first date formatter loads ICU's locale data, which costs more
// than the rest of the first screen (docs/benchmarks/pwa.md).
const pad = (n) => String(n).padStart(2, '0');
function when(t) {
  if (!t) return 'never';
  const d = new Date(t * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function Feed() {
  useApp();
  const { notes, names: nm } = app.feed;
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
      const ev = await (await live()).publish({ kind: 1, content: text });
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
      await (await live()).publish({ kind: 0, content: JSON.stringify({ name }) });
      setMsg('Name saved.');
    } catch (err) { setMsg(String(err.message || err)); }
  };
  const addFollow = async (e) => {
    e.preventDefault();
    try {
      let pk = follow.trim();
      if (pk.startsWith('npub1')) pk = nip19decode(pk).data;
      if (!/^[0-9a-f]{64}$/.test(pk)) throw new Error('give an npub1… or a 64-character hex public key');
      await (await live()).follow(pk);
      setFollow('');
      setMsg('Following.');
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
      const l = await live();
      const h = await l.withLeaf((leaf) => leaf.pair(code.trim()));
      setCode('');
      setMsg(`Paired with ${h.did}.`);
      await l.wakeLeaf();
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
        <dt>Nostr key</dt><dd><code id="npub">{app.pubkey ? npubEncode(app.pubkey) : 'loading…'}</code>{app.signer && ` (${app.signer.kind === 'nip07' ? 'browser signer' : 'kept on this device'})`}</dd>
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
      const l = await live();
      const id = await l.sendBasicMessage(to.trim(), text);
      setText('');
      setMsg(`Queued ${id.slice(0, 8)}.`);
      await l.wakeLeaf();
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

// start paints the first screen of the cached feed, then reads the rest
// of it and loads the live side. Nothing before the first paint waits on
// the network, a key or the whole local copy.
async function start() {
  const first = await firstScreen(FIRST_SCREEN, FIRST_SCREEN_SCAN).catch(() => null);
  if (first) {
    app.follows = first.follows;
    app.pubkey = first.pubkey;
    app.feed = { notes: first.notes, names: names(first.profiles) };
  }
  const root = document.getElementById('app');
  root.textContent = '';
  render(<App />, root);
  // After the frame with the first screen is painted: the rest, and the
  // tab's icon (an SVG image document of its own to parse).
  requestAnimationFrame(() => setTimeout(() => {
    refreshFeed();
    document.head.append(Object.assign(document.createElement('link'), { rel: 'icon', type: 'image/svg+xml', href: 'icon.svg' }));
    live().catch((e) => update({ error: `loading the app: ${e.message || e}` }));
  }));
}

start();
