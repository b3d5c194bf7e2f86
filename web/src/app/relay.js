// A small NIP-01 / NIP-77 client over one WebSocket, for the page and the
// service worker. Hand-written rather than nostr-tools' Relay because the
// app must close every socket when it is hidden (no reconnect timers, no
// pings left behind), and the status view and the benchmark count what
// crossed the wire (messages and bytes each way, negentropy rounds). The
// negentropy protocol itself is nostr-tools' (nostr-tools/nip77).
import { Negentropy, NegentropyStorageVector } from 'nostr-tools/nip77';

// CONNECT_TIMEOUT_MS, REQUEST_TIMEOUT_MS bound a connection attempt and
// one request's answer (spec/limits.md).
export const CONNECT_TIMEOUT_MS = 10000;
export const REQUEST_TIMEOUT_MS = 20000;

export class RelayConn {
  constructor(url) {
    this.url = url;
    this.ws = null;
    this.waiters = new Map(); // subscription or event id -> handler
    this.stats = { sent: 0, received: 0, bytesOut: 0, bytesIn: 0, negRounds: 0 };
    this.serial = 0;
    this.onclose = null;
  }

  get open() {
    return this.ws?.readyState === WebSocket.OPEN;
  }

  connect() {
    if (this.open) return Promise.resolve();
    return (this.connecting ??= new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url);
      const t = setTimeout(() => { ws.close(); reject(new Error(`no answer from ${this.url}`)); }, CONNECT_TIMEOUT_MS);
      ws.onopen = () => { clearTimeout(t); this.ws = ws; resolve(); };
      ws.onerror = () => { clearTimeout(t); reject(new Error(`cannot reach ${this.url}`)); };
      ws.onclose = () => {
        clearTimeout(t);
        this.ws = null;
        this.connecting = null;
        for (const h of this.waiters.values()) h(['CLOSED', '', 'error: connection closed']);
        this.waiters.clear();
        this.onclose?.();
      };
      ws.onmessage = (m) => {
        this.stats.received++;
        this.stats.bytesIn += m.data.length;
        let msg;
        try { msg = JSON.parse(m.data); } catch { return; }
        if (!Array.isArray(msg)) return;
        const h = this.waiters.get(msg[1]);
        if (h) h(msg);
      };
    }).finally(() => { this.connecting = null; }));
  }

  close() {
    this.ws?.close();
    this.ws = null;
  }

  send(msg) {
    const s = JSON.stringify(msg);
    this.stats.sent++;
    this.stats.bytesOut += s.length;
    this.ws.send(s);
  }

  nextID(prefix) {
    return `${prefix}${++this.serial}`;
  }

  // publish sends a signed event and resolves with the relay's OK
  // ([accepted, message]); a duplicate counts as accepted.
  async publish(ev) {
    await this.connect();
    return this.answer(ev.id, ['EVENT', ev], (msg, done) => {
      if (msg[0] === 'OK') done([msg[2] === true || String(msg[3]).startsWith('duplicate:'), String(msg[3] || '')]);
      else if (msg[0] === 'CLOSED') done([false, msg[2]]);
    });
  }

  // query runs a REQ to EOSE and resolves with the events.
  async query(filters) {
    await this.connect();
    const id = this.nextID('q');
    const events = [];
    try {
      return await this.answer(id, ['REQ', id, ...filters], (msg, done, fail) => {
        if (msg[0] === 'EVENT') events.push(msg[2]);
        else if (msg[0] === 'EOSE') done(events);
        else if (msg[0] === 'CLOSED') fail(new Error(msg[2]));
      });
    } finally {
      if (this.open) this.send(['CLOSE', id]);
    }
  }

  // subscribe keeps a REQ open, calling onevent for each event, until the
  // returned function is called or the connection closes.
  async subscribe(filters, onevent) {
    await this.connect();
    const id = this.nextID('live');
    this.waiters.set(id, (msg) => { if (msg[0] === 'EVENT') onevent(msg[2]); });
    this.send(['REQ', id, ...filters]);
    return () => {
      this.waiters.delete(id);
      if (this.open) this.send(['CLOSE', id]);
    };
  }

  // reconcile runs NIP-77 for filter against the relay with the local
  // (created_at, id) pairs have, and resolves with the ids the relay has
  // and the app lacks. It rejects on NEG-ERR (the caller falls back to a
  // since REQ).
  async reconcile(filter, have) {
    await this.connect();
    const storage = new NegentropyStorageVector();
    for (const [ts, id] of have) storage.insert(ts, id);
    storage.seal();
    const neg = new Negentropy(storage, 50000);
    const id = this.nextID('neg');
    const need = [];
    const init = neg.initiate();
    this.stats.negRounds++;
    try {
      return await this.answer(id, ['NEG-OPEN', id, filter, init], (msg, done, fail) => {
        if (msg[0] === 'NEG-MSG') {
          const next = neg.reconcile(msg[2], undefined, (x) => need.push(x));
          if (next) {
            this.stats.negRounds++;
            this.send(['NEG-MSG', id, next]);
          } else done(need);
        } else if (msg[0] === 'NEG-ERR' || msg[0] === 'CLOSED') fail(new Error(`negentropy: ${msg[2]}`));
      });
    } finally {
      if (this.open) this.send(['NEG-CLOSE', id]);
    }
  }

  answer(key, msg, onmsg) {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => fail(new Error(`no answer from ${this.url} in time`)), REQUEST_TIMEOUT_MS);
      const done = (v) => { clearTimeout(t); this.waiters.delete(key); resolve(v); };
      const fail = (e) => { clearTimeout(t); this.waiters.delete(key); reject(e); };
      this.waiters.set(key, (m) => {
        if (m[0] === 'CLOSED' && m[1] === '') fail(new Error(m[2]));
        else onmsg(m, done, fail);
      });
      try { this.send(msg); } catch (e) { fail(e); }
    });
  }
}
