// The browser leaf: a fleetmesh leaf (spec/leaf.md) whose DIDComm side runs
// in a page or a service worker. It pairs with homes, has them mediate
// for it, picks up what they queued while it was closed, sends DIDComm
// messages through them, and exchanges receipts with them, all in short
// wakes that the app starts (on open, on being shown, on a periodic or
// background sync). Between wakes it holds no socket or timer.
//
// What is the app's and not here: the Nostr side (relay catch-up, the
// outbox of events), IndexedDB (behind the Storage interface), and asking
// for persistent storage.
import { Packer, Problem, Unpacker, didKeyResolver, newID, publicKeyFromDID, secretsFromSeed } from '../didcomm/index.js';
import { CodeInternal, CodeQueueFull, CodeRateLimited, CodeUnsupportedType } from '../didcomm/problem.js';
import { b64std, unb64std } from '../didcomm/bytes.js';
import { parseInvitation } from './invitation.js';
import { MediationClient, TransportError, postDIDComm, problemOf, route } from './mediation.js';
import {
  CodeNotReady, DefaultBounds, Disagreement, TypeCountersign, TypeDisputeOpen, TypePropose, TypeSign,
  checkSigned, decodeReceipt, disputedReceipt, encodeReceipt, pairOf, proposeBody, receiptJSON, sideOf, signReceipt, verifyReceipt, zeroSide,
} from './receipt.js';
import { numKey } from './storage.js';

/** Defaults (spec/browser-leaf.md; the same as the Go leaf's where it has one). */
export const Defaults = Object.freeze({
  /** A wake's budget: it returns within it. */
  budgetMs: 25_000,
  /** One request and its answer wait at most this (the Go leaf's exchangeTimeout). */
  exchangeTimeoutMs: 8_000,
  /** Messages asked for per pickup delivery. */
  deliveryBatch: 100,
  /** The accounting window; must equal the homes' `[accounting] window`. */
  windowSecs: 3600,
  /** How long after a window's end the leaf still proposes its receipt. */
  disputePeriodSecs: 7 * 24 * 3600,
  /** Delivery ids and (sender, id) pairs remembered to drop a redelivery. */
  maxSeen: 10_000,
  /**
   * A home whose requests have failed without an answer for this long is
   * left for the rest of the wake (spec/leaf.md "More than one home");
   * until then its step is retried after a pause of 100 ms doubling to 2 s.
   */
  unreachableAfterMs: 5_000,
});

/** Rounds of one window's proposal before it is recorded disputed. */
const disputeRounds = 3;
/** The least time left in a wake for the receipt exchange to start. */
const receiptReserveMs = 2_000;

/** A leaf of its own, for one identity. Open it with Leaf.open. */
export class Leaf {
  #storage;
  #fetch;
  #cfg;
  #secrets;
  #packer;
  #unpacker;
  #queue = Promise.resolve();
  #writes = Promise.resolve();

  constructor(storage, seed, cfg, fetchFn) {
    this.#storage = storage;
    this.#cfg = cfg;
    this.#fetch = fetchFn;
    this.#secrets = secretsFromSeed(seed);
    this.#packer = new Packer(this.#secrets, didKeyResolver);
    this.#unpacker = new Unpacker(this.#secrets, didKeyResolver, { now: () => Math.floor(this.#cfg.now() / 1000) });
  }

  /**
   * Opens the leaf whose state is in storage and whose seed keyStore keeps.
   * @param {{storage: import('./index.js').Storage, keyStore: {seed(): Promise<Uint8Array>},
   *   fetch?: typeof fetch, now?: () => number} & Partial<typeof Defaults>} o
   */
  static async open(o) {
    if (!o || !o.storage || !o.keyStore) throw new Error('leaf: open needs a storage and a keyStore');
    const cfg = { ...Defaults, now: () => Date.now() };
    for (const k of Object.keys(Defaults)) if (o[k] !== undefined) cfg[k] = o[k];
    if (o.now) cfg.now = o.now;
    const seed = await o.keyStore.seed();
    const fetchFn = o.fetch || globalThis.fetch.bind(globalThis);
    return new Leaf(o.storage, seed, cfg, fetchFn);
  }

  /** The leaf's did:key. */
  get did() {
    return this.#secrets.did;
  }

  // Runs fn after every operation started before it: the leaf is the
  // only writer of its stores, one operation at a time.
  #serial(fn) {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  // Runs fn after every other critical section of this leaf: a wake
  // works with its homes at once, and storing a delivery reads and
  // advances counters and the seen ids that two homes' pickups share.
  #critical(fn) {
    const run = this.#writes.then(fn, fn);
    this.#writes = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  #nowSecs() {
    return Math.floor(this.#cfg.now() / 1000);
  }

  /**
   * Records a home from its invitation: a join code (fmjoin1… or
   * fleetmesh:fmjoin1…), an out-of-band URL (?_oob=) or its JSON.
   * Mediation is requested in the next wake; pairing again with the same
   * node only updates its endpoint.
   * @returns {Promise<{did: string, endpoint: string}>}
   */
  pair(invitation) {
    return this.#serial(async () => {
      const { did, endpoint } = parseInvitation(String(invitation), this.#nowSecs());
      const old = await this.#storage.get('homes', did);
      await this.#storage.batch([{ store: 'homes', key: did, value: { ...(old || { did, mediated: false }), endpoint } }]);
      return { did, endpoint };
    });
  }

  /**
   * Pairs with the node at baseURL (the one that served the app: its
   * origin): its `GET /didcomm` answers with its out-of-band invitation.
   */
  async pairWithNode(baseURL) {
    const url = new URL('/didcomm', baseURL).toString();
    const t = deadlineSignal(this.#cfg.exchangeTimeoutMs);
    let text;
    try {
      const resp = await this.#fetch(url, { method: 'GET', signal: t.signal });
      if (!resp.ok) throw new Error(`leaf: pair: GET ${url}: HTTP ${resp.status}`);
      text = await resp.text();
    } finally {
      t.clear();
    }
    return this.pair(text);
  }

  /** The paired homes: [{did, endpoint, mediated}]. */
  async homes() {
    return (await this.#storage.entries('homes')).map(([, h]) => h);
  }

  /**
   * Queues a DIDComm plaintext (type and body at least) for the DID to:
   * authcrypted now, sent by the next wake to that DID if it is a home,
   * else forwarded through the first home (which must mediate for to).
   * Resolves to the message id.
   */
  sendMessage(to, message) {
    return this.#serial(async () => {
      publicKeyFromDID(to);
      if (!message || typeof message.type !== 'string' || message.type === '') throw new Error('leaf: invalid: message has no type');
      const m = { ...message, id: message.id || newID(), body: message.body || {}, created_time: message.created_time || this.#nowSecs(), from: this.did, to: [to] };
      const packed = this.#packer.pack(m, { mode: 'authcrypt' });
      const homes = await this.homes();
      if (homes.length === 0) throw new Error('leaf: pair with a home node first (pair)');
      const via = homes.some((h) => h.did === to) ? to : homes[0].did;
      const seq = ((await this.#storage.get('meta', 'outboxSeq')) || 0) + 1;
      await this.#storage.batch([
        { store: 'meta', key: 'outboxSeq', value: seq },
        { store: 'outbox', key: numKey(seq), value: { seq, kind: 'message', id: m.id, data: packed, to, via } },
      ]);
      return m.id;
    });
  }

  /** Picked-up messages after seq: [{seq, delivery_id, mediator, id, from, authenticated, message | packed, error}]. */
  async messages(afterSeq = 0, limit = 100) {
    const out = [];
    for (const [, m] of await this.#storage.entries('messages')) {
      if (m.seq > afterSeq) out.push(m);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Removes a message the app has handled. */
  deleteMessage(seq) {
    return this.#serial(() => this.#storage.batch([{ store: 'messages', key: numKey(seq), del: true }]));
  }

  /** Outbox entries still waiting. */
  async outbox() {
    return (await this.#storage.entries('outbox')).map(([, e]) => e);
  }

  /** Outbox entries a home refused for good, with the reason. */
  async rejected() {
    return (await this.#storage.entries('rejected')).map(([, e]) => e);
  }

  /**
   * The leaf's receipts with its homes in the form `fleetmesh receipts
   * --json` prints: co-signed in pair and seq order, then disputed.
   */
  async receipts() {
    const co = [];
    const disputed = [];
    for (const [k, raw] of await this.#storage.entries('receipts')) {
      if (k.startsWith('r:')) co.push(receiptJSON(decodeReceipt(raw)));
      if (k.startsWith('d:')) disputed.push(receiptJSON(decodeReceipt(raw)));
    }
    return [...co, ...disputed];
  }

  /**
   * One wake: with every home at once, mediation if not granted yet, the
   * pickup of what it queued, the outbox messages it takes; then the
   * receipts of the closed windows, while 2 s of the budget are left.
   * Resolves to a summary; a failure with one home is in its error and
   * does not stop the others.
   * @param {{signal?: AbortSignal}} [o]
   * @returns {Promise<import('./index.js').Summary>}
   */
  wake(o = {}) {
    return this.#serial(async () => {
      // The budget's timer is cleared when the wake ends: between wakes
      // the leaf holds no timer.
      const budget = deadlineSignal(this.#cfg.budgetMs, o.signal);
      try {
        return await this.#wake(budget.signal);
      } finally {
        budget.clear();
      }
    });
  }

  async #wake(signal) {
    const start = this.#cfg.now();
    const deadline = start + this.#cfg.budgetMs;
    const s = { picked_up: 0, outbox_sent: 0, outbox_left: 0, receipts: 0, receipts_left: 0, round_trips: 0, bytes_sent: 0, bytes_received: 0, duration_ms: 0, caught_up: false, cancelled: false, error: '' };
    const fail = (e) => {
      if (!s.error) s.error = e instanceof Error ? e.message : String(e);
    };
    const homes = await this.homes();
    const reached = new Set();
    await Promise.all(
      homes.map(async (h) => {
        try {
          await this.#retry(signal, () => this.#homeWake(h, signal, s));
          reached.add(h.did);
        } catch (e) {
          fail(new Error(`leaf: ${h.did}: ${e.message}`));
        }
      }),
    );
    const timeLeft = () => !signal.aborted && deadline - this.#cfg.now() >= receiptReserveMs;
    await Promise.all(
      homes.filter((h) => reached.has(h.did)).map(async (h) => {
        try {
          await this.#retry(signal, () => this.#receiptsWith(h, signal, s, timeLeft));
        } catch (e) {
          fail(new Error(`leaf: receipts with ${h.did}: ${e.message}`));
        }
      }),
    );
    s.outbox_left = (await this.outbox()).length;
    for (const h of homes) s.receipts_left += (await this.#closedWindows(h.did)).length;
    s.cancelled = signal.aborted;
    s.caught_up = s.error === '' && !s.cancelled && s.outbox_left === 0 && homes.length > 0;
    s.duration_ms = this.#cfg.now() - start;
    return s;
  }

  // Runs a home's step again while it fails without an answer, until the
  // wake ends or the home has been silent for Defaults.unreachableAfterMs. Every
  // step is safe to repeat: a redelivery is dropped by its ids, a forward
  // sent twice is dropped by the recipient's (sender, id), a proposal at a
  // seq already signed gets the same receipt.
  async #retry(signal, step) {
    let pause = 100;
    let failingSince = 0;
    for (;;) {
      try {
        return await step();
      } catch (e) {
        if (!(e instanceof TransportError) || signal.aborted) throw e;
        const now = this.#cfg.now();
        if (failingSince === 0) failingSince = now;
        const limit = this.#cfg.unreachableAfterMs;
        if (now - failingSince >= limit) throw new Error(`unreachable for ${limit / 1000} s: ${e.message}`);
        await new Promise((resolve) => {
          const t = setTimeout(resolve, pause);
          signal.addEventListener('abort', () => {
            clearTimeout(t);
            resolve();
          }, { once: true });
        });
        if (signal.aborted) throw e;
        pause = Math.min(pause * 2, 2_000);
      }
    }
  }

  #client(h, signal, s) {
    return new MediationClient({
      packer: this.#packer,
      unpacker: this.#unpacker,
      mediator: h.did,
      exchange: (packed) => this.#post(h.endpoint, packed, signal, s),
    });
  }

  async #post(endpoint, packed, signal, s) {
    const t = deadlineSignal(this.#cfg.exchangeTimeoutMs, signal);
    s.round_trips++;
    s.bytes_sent += packed.length;
    let answer;
    try {
      answer = await postDIDComm(this.#fetch, endpoint, packed, t.signal);
    } finally {
      t.clear();
    }
    s.bytes_received += answer ? answer.length : 0;
    return answer;
  }

  async #homeWake(h, signal, s) {
    const c = this.#client(h, signal, s);
    if (!h.mediated) {
      await c.mediate(this.did);
      h.mediated = true;
      const cur = (await this.#storage.get('homes', h.did)) || h;
      await this.#storage.batch([{ store: 'homes', key: h.did, value: { ...cur, mediated: true } }]);
    }
    s.picked_up += await this.#pickup(c, h.did);
    await this.#flushOutbox(h, signal, s);
  }

  // pickup stores each delivery, with the window's count of it, in one
  // atomic batch before messages-received acknowledges it.
  async #pickup(c, home) {
    let added = 0;
    await c.collect(this.#cfg.deliveryBatch, async (batch) => {
      added += await this.#critical(() => this.#storeDelivery(home, batch));
    });
    return added;
  }

  #open(home, d) {
    const m = { delivery_id: d.id, mediator: home };
    try {
      const u = this.#unpacker.unpack(d.packed);
      m.id = u.message.id;
      m.authenticated = u.authenticated;
      if (u.authenticated) m.from = u.message.from;
      m.message = u.message;
    } catch (e) {
      // Acknowledged, so kept packed with the reason rather than lost.
      m.packed = d.packed;
      m.error = e.message;
    }
    return m;
  }

  async #storeDelivery(home, batch) {
    const now = this.#nowSecs();
    const secs = this.#cfg.windowSecs;
    const windowStart = now - (now % secs);
    const acctKey = home + '\u0000' + numKey(windowStart);
    const w = (await this.#storage.get('acct', acctKey)) || { start: windowStart, secs, mine: zeroSide(), rounds: 0 };
    w.mine.received.mediation_messages += batch.length;
    const ops = [{ store: 'acct', key: acctKey, value: w }];
    let msgSeq = (await this.#storage.get('meta', 'msgSeq')) || 0;
    let seenSeq = (await this.#storage.get('meta', 'seenSeq')) || 0;
    const marked = new Set();
    const seen = async (key) => marked.has(key) || (await this.#storage.get('seen', key)) !== undefined;
    const mark = async (key) => {
      marked.add(key);
      seenSeq++;
      ops.push({ store: 'seen', key, value: seenSeq }, { store: 'seen', key: 'o:' + numKey(seenSeq), value: key });
      const old = await this.#storage.get('seen', 'o:' + numKey(seenSeq - this.#cfg.maxSeen));
      if (old !== undefined) ops.push({ store: 'seen', key: old, del: true }, { store: 'seen', key: 'o:' + numKey(seenSeq - this.#cfg.maxSeen), del: true });
    };
    let added = 0;
    for (const d of batch) {
      if (await seen('d:' + d.id)) continue;
      await mark('d:' + d.id);
      const m = this.#open(home, d);
      if (m.id) {
        const idKey = 'm:' + (m.from || '') + ' ' + m.id;
        if (await seen(idKey)) continue; // the same message forwarded twice
        await mark(idKey);
      }
      msgSeq++;
      ops.push({ store: 'messages', key: numKey(msgSeq), value: { seq: msgSeq, ...m } });
      added++;
    }
    ops.push({ store: 'meta', key: 'msgSeq', value: msgSeq }, { store: 'meta', key: 'seenSeq', value: seenSeq });
    await this.#storage.batch(ops);
    return added;
  }

  async #flushOutbox(h, signal, s) {
    for (const [key, e] of await this.#storage.entries('outbox')) {
      if (e.via !== h.did) continue;
      const out = e.to === h.did ? e.data : route(this.#packer, e.data, e.to, h.did);
      const answer = await this.#post(h.endpoint, out, signal, s);
      const { reason, keep } = this.#refusal(answer);
      if (keep) continue;
      const ops = [{ store: 'outbox', key, del: true }];
      if (reason) ops.push({ store: 'rejected', key, value: { ...e, reason } });
      else s.outbox_sent++;
      await this.#storage.batch(ops);
    }
  }

  // A home's answer to a sent message: taken ("" reason) when empty or not
  // a problem report; else the code, kept for a later wake only for a
  // full queue, a rate limit or an internal error.
  #refusal(answer) {
    if (answer === null) return { reason: '', keep: false };
    let m;
    try {
      m = this.#unpacker.unpack(answer).message;
    } catch (e) {
      return { reason: e instanceof Problem ? e.code : e.message, keep: false };
    }
    const p = problemOf(m);
    if (!p) return { reason: '', keep: false };
    if ([CodeQueueFull, CodeInternal, CodeRateLimited].includes(p.code)) return { reason: p.code, keep: true };
    return { reason: `${p.code}: ${p.comment}`, keep: false };
  }

  // --- receipts (spec/leaf.md "Receipts") ---

  #pairKey(home) {
    return pairOf(this.did, home).join(' ');
  }

  async #closedWindows(home) {
    const now = this.#nowSecs();
    const pfx = home + '\u0000';
    return (await this.#storage.entries('acct')).filter(([k, w]) => k.startsWith(pfx) && w.start + w.secs <= now).map(([, w]) => w);
  }

  async #head(pair) {
    const seq = await this.#storage.get('receipts', 'h:' + pair);
    if (seq === undefined) return null;
    const raw = await this.#storage.get('receipts', 'r:' + pair + '\u0000' + numKey(seq));
    if (!raw) throw new Error(`leaf: receipt head of ${pair} names a missing receipt`);
    return decodeReceipt(raw);
  }

  async #mineFor(home, pair, window) {
    const w = await this.#storage.get('acct', home + '\u0000' + numKey(window));
    if (w) return w.mine;
    const raw = await this.#storage.get('receipts', 'd:' + pair + '\u0000' + numKey(window));
    return raw ? sideOf(decodeReceipt(raw), this.did) : null;
  }

  async #markDisputed(home, w) {
    const r = disputedReceipt(this.did, this.#secrets.signing.seed, home, w.start, w.secs, w.mine, w.theirs);
    await this.#storage.batch([
      { store: 'receipts', key: 'd:' + this.#pairKey(home) + '\u0000' + numKey(w.start), value: encodeReceipt(r) },
      { store: 'acct', key: home + '\u0000' + numKey(w.start), del: true },
    ]);
  }

  async #countersign(c, pair, r) {
    await c.request(TypeCountersign, { receipt: b64std(encodeReceipt(r)) });
    if ((await this.#storage.get('receipts', 'u:' + pair)) === r.seq) await this.#storage.batch([{ store: 'receipts', key: 'u:' + pair, del: true }]);
  }

  async #receiptsWith(h, signal, s, timeLeft) {
    if (!h.mediated || !timeLeft()) return;
    const c = this.#client(h, signal, s);
    const pair = this.#pairKey(h.did);
    const unacked = await this.#storage.get('receipts', 'u:' + pair);
    if (unacked !== undefined) {
      await this.#countersign(c, pair, decodeReceipt(await this.#storage.get('receipts', 'r:' + pair + '\u0000' + numKey(unacked))));
    }
    const now = this.#nowSecs();
    for (const w of await this.#closedWindows(h.did)) {
      if (!timeLeft()) return;
      if (now > w.start + w.secs + this.#cfg.disputePeriodSecs || w.rounds >= disputeRounds) {
        await this.#markDisputed(h.did, w);
        continue;
      }
      if (!(await this.#proposeWindow(c, h.did, pair, w, s))) return;
    }
  }

  // One window's exchange, the proposer's side (exchange.Proposer): it
  // says whether the next window may follow in this wake.
  async #proposeWindow(c, home, pair, w, s) {
    const head = await this.#head(pair);
    const round = w.rounds + 1;
    let reply;
    try {
      reply = await c.request(TypePropose, proposeBody(head, w.start, w.secs, w.mine, round, DefaultBounds));
    } catch (e) {
      // The home has not saved the window yet, or keeps no accounts: the
      // window waits for a later wake, at most the dispute period.
      if (e instanceof Problem && (e.code === CodeNotReady || e.code === CodeUnsupportedType)) return false;
      throw e;
    }
    if (reply.type === TypeSign) {
      // The home may sign an older window than proposed (what it signed
      // at a seq it signs again): the leaf's figures for the window the
      // receipt names are what it is checked against.
      const win = signedWindow(reply.body);
      const held = win === null ? null : await this.#mineFor(home, pair, win);
      let r;
      try {
        r = checkSigned(reply.body, this.did, home, head, w.secs, DefaultBounds, (x) => (x === win ? held : null));
      } catch (e) {
        if (!(e instanceof Disagreement)) throw e;
        // A refusal of what the home signed is a dispute, never a signature.
        await c.request(TypeDisputeOpen, { window_start: w.start, counts: w.mine, round, reason: e.reason }).catch(() => {});
        return this.#disputeRound(home, w, round, e.window === w.start ? e.theirs : null);
      }
      signReceipt(r, this.did, this.#secrets.signing.seed);
      verifyReceipt(r);
      const raw = encodeReceipt(r);
      const stored = await this.#storage.get('receipts', 'r:' + pair + '\u0000' + numKey(r.seq));
      if (stored && !bytesEqual(stored, raw)) throw new Error(`leaf: a different receipt is stored for ${pair} seq ${r.seq}`);
      await this.#storage.batch([
        { store: 'receipts', key: 'r:' + pair + '\u0000' + numKey(r.seq), value: raw },
        { store: 'receipts', key: 'h:' + pair, value: r.seq },
        { store: 'receipts', key: 'u:' + pair, value: r.seq },
        { store: 'acct', key: home + '\u0000' + numKey(r.window_start), del: true },
        { store: 'receipts', key: 'd:' + pair + '\u0000' + numKey(r.window_start), del: true },
      ]);
      s.receipts++;
      await this.#countersign(c, pair, r);
      return true;
    }
    if (reply.type === TypeDisputeOpen) {
      const d = reply.body || {};
      return this.#disputeRound(home, w, round, d.window_start === w.start ? d.counts : null);
    }
    throw new Error(`unexpected answer ${reply.type} to a proposal`);
  }

  async #disputeRound(home, w, round, theirs) {
    const next = { ...w, rounds: round };
    if (theirs) next.theirs = theirs;
    const key = home + '\u0000' + numKey(w.start);
    if (round < disputeRounds) {
      if ((await this.#storage.get('acct', key)) !== undefined) await this.#storage.batch([{ store: 'acct', key, value: next }]);
      return false; // proposed again next wake
    }
    await this.#markDisputed(home, next);
    return true;
  }
}

// A signal aborted after ms, or when parent is; clear() stops its timer
// (AbortSignal.timeout's cannot be stopped, and would outlive the wake).
function deadlineSignal(ms, parent) {
  const c = new AbortController();
  const timer = setTimeout(() => c.abort(new DOMException(`no answer within ${ms} ms`, 'TimeoutError')), ms);
  const onAbort = () => c.abort(parent.reason);
  if (parent) {
    if (parent.aborted) c.abort(parent.reason);
    else parent.addEventListener('abort', onAbort, { once: true });
  }
  return {
    signal: c.signal,
    clear() {
      clearTimeout(timer);
      if (parent) parent.removeEventListener('abort', onAbort);
    },
  };
}

// The window of the receipt in a sign body, or null when it does not decode
// (checkSigned then says why).
function signedWindow(body) {
  try {
    return decodeReceipt(unb64std(body.receipt)).window_start;
  } catch {
    return null;
  }
}

function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
