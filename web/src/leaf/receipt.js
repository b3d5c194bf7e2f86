// Receipts (spec/receipts.md) and the leaf's side of their exchange
// (spec/leaf.md "Receipts"), as the Go packages receipt and
// accounting/exchange define them: the record, its canonical bytes, CID
// and signatures, and the checks the proposer makes before it
// countersigns. A leaf always proposes.
import { ed25519 } from '@noble/curves/ed25519.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { base32nopad } from '@scure/base';
import { b64std, b64u, concat, equalBytes, unb64std, utf8Encode } from '../didcomm/bytes.js';
import { publicKeyFromDID } from '../didcomm/didkey.js';
import { decode, encode } from './cbor.js';

export const Version = 1;
const signaturePrefix = utf8Encode('fleetmesh receipt v1\u0000');

export const PIURIReceipt = 'https://fleetmesh.org/protocols/receipt/1.0';
export const TypePropose = PIURIReceipt + '/propose';
export const TypeSign = PIURIReceipt + '/sign';
export const TypeCountersign = PIURIReceipt + '/countersign';
export const TypeAck = PIURIReceipt + '/ack';
export const TypeDisputeOpen = 'https://fleetmesh.org/protocols/dispute/1.0/open';
/** The home has not saved the window yet. */
export const CodeNotReady = 'e.p.req.time.window-open';

/** A count per service, in the order the Go Counts struct has them. */
export const countNames = ['events', 'bytes', 'storage_bytes', 'circuit_seconds', 'circuit_bytes', 'mediation_messages', 'compute_units'];

/** @returns {Record<string, number>} all zero */
export const zeroCounts = () => Object.fromEntries(countNames.map((n) => [n, 0]));
/** @returns {{gave: Record<string, number>, received: Record<string, number>}} */
export const zeroSide = () => ({ gave: zeroCounts(), received: zeroCounts() });

/** A node's default bounds, and a leaf's (exchange.DefaultBounds). */
export const DefaultBounds = Object.freeze({ tolerance: 0.02, slack: 2 });
const slackEventBytes = 65536;
const circuitSlackBytes = 1024;

/** The pair's DIDs in receipt order. */
export const pairOf = (x, y) => (x < y ? [x, y] : [y, x]);

function checkCounts(c, what) {
  if (!c || typeof c !== 'object') throw new Error(`receipt: malformed receipt: ${what} is not a map`);
  const keys = Object.keys(c);
  if (keys.length !== countNames.length || !countNames.every((n) => Number.isSafeInteger(c[n]) && c[n] >= 0)) {
    throw new Error(`receipt: malformed receipt: ${what} must have exactly ${countNames.join(', ')}`);
  }
}

function checkSide(s, what) {
  if (!s || typeof s !== 'object' || Object.keys(s).length !== 2) throw new Error(`receipt: malformed receipt: ${what} must be {gave, received}`);
  checkCounts(s.gave, `${what}.gave`);
  checkCounts(s.received, `${what}.received`);
}

// The record as the canonical encoder takes it: every field, signatures
// only when present.
function record(r, withSigs) {
  const pick = (c) => Object.fromEntries(countNames.map((n) => [n, c[n]]));
  const side = (s) => ({ gave: pick(s.gave), received: pick(s.received) });
  return {
    v: r.v, a: r.a, b: r.b, window_start: r.window_start, window_secs: r.window_secs, seq: r.seq,
    prev: r.prev, counts_a: side(r.counts_a), counts_b: side(r.counts_b), disputed: r.disputed, settlement: null,
    sig_a: withSigs && r.sig_a ? r.sig_a : undefined, sig_b: withSigs && r.sig_b ? r.sig_b : undefined,
  };
}

/** An unsigned receipt with a null settlement. */
export function newReceipt(a, b, windowStart, windowSecs, seq, prev, countsA, countsB) {
  return { v: Version, a, b, window_start: windowStart, window_secs: windowSecs, seq, prev: prev || null, counts_a: countsA, counts_b: countsB, disputed: false, settlement: null };
}

/** The canonical bytes both signatures cover. */
export const signingBytes = (r) => encode(record(r, false));
/** The canonical bytes with the signatures. */
export const encodeReceipt = (r) => encode(record(r, true));

/** The binary CIDv1 (raw codec, sha2-256) of bytes. */
export const cidBytesOf = (b) => concat(Uint8Array.of(0x01, 0x55, 0x12, 0x20), sha256(b));
/** The receipt's binary CID (of its signing bytes). */
export const receiptCID = (r) => cidBytesOf(signingBytes(r));
/** A binary CID as text (multibase base32, `b…`). */
export const cidString = (c) => 'b' + base32nopad.encode(c).toLowerCase();

/**
 * Decodes a receipt and checks its form (not its signatures).
 * @param {Uint8Array} raw
 */
export function decodeReceipt(raw) {
  let v;
  try {
    v = decode(raw);
  } catch (e) {
    throw new Error(`receipt: malformed receipt: ${e.message}`);
  }
  const known = new Set(['v', 'a', 'b', 'window_start', 'window_secs', 'seq', 'prev', 'counts_a', 'counts_b', 'disputed', 'settlement', 'sig_a', 'sig_b']);
  for (const k of Object.keys(v)) if (!known.has(k)) throw new Error(`receipt: malformed receipt: unknown field ${k}`);
  if (!('settlement' in v)) throw new Error('receipt: settlement must be present and null in receipt format v1: the field is missing');
  if (v.settlement !== null) throw new Error('receipt: settlement must be present and null in receipt format v1: it holds a value');
  checkReceipt(v);
  return v;
}

/** Checks everything about a receipt except its signatures. */
export function checkReceipt(r) {
  const bad = (m) => new Error(`receipt: malformed receipt: ${m}`);
  if (r.v !== Version) throw bad(`version ${r.v}, want ${Version}`);
  if (typeof r.a !== 'string' || typeof r.b !== 'string' || !(r.a < r.b)) throw bad('a must sort before b');
  if (!Number.isSafeInteger(r.window_secs) || r.window_secs <= 0) throw bad(`window_secs ${r.window_secs} must be positive`);
  if (!Number.isSafeInteger(r.window_start) || r.window_start < 0 || r.window_start % r.window_secs !== 0) throw bad(`window_start ${r.window_start} is not aligned to window_secs ${r.window_secs} (UTC)`);
  if (!Number.isSafeInteger(r.seq) || r.seq < 0) throw bad('seq must be an unsigned integer');
  if (typeof r.disputed !== 'boolean') throw bad('disputed must be a bool');
  if (r.prev !== null && !(r.prev instanceof Uint8Array)) throw bad('prev must be bytes or null');
  for (const s of ['sig_a', 'sig_b']) if (r[s] !== undefined && !(r[s] instanceof Uint8Array)) throw bad(`${s} must be bytes`);
  checkSide(r.counts_a, 'counts_a');
  checkSide(r.counts_b, 'counts_b');
  for (const d of [r.a, r.b]) {
    try {
      publicKeyFromDID(d);
    } catch (e) {
      throw bad(`party ${JSON.stringify(d)}: ${e.message}`);
    }
  }
  if (r.disputed) {
    if (r.seq !== 0 || r.prev !== null) throw bad('a disputed receipt is outside the chain: seq 0 and prev null');
    if ((r.sig_a === undefined) === (r.sig_b === undefined)) throw bad('a disputed receipt is signed by the reporting side only');
    return;
  }
  if (r.seq === 0) throw bad('seq starts at 1');
  if ((r.seq === 1) !== (r.prev === null)) throw bad('prev must be null exactly when seq is 1');
  if (r.prev !== null && (r.prev.length !== 36 || !equalBytes(r.prev.slice(0, 4), Uint8Array.of(0x01, 0x55, 0x12, 0x20)))) {
    throw bad('prev is not a raw sha2-256 CIDv1');
  }
}

/** Adds the signature of the party whose seed is given. */
export function signReceipt(r, did, seed) {
  const sig = ed25519.sign(concat(signaturePrefix, signingBytes(r)), seed);
  if (did === r.a) r.sig_a = sig;
  else if (did === r.b) r.sig_b = sig;
  else throw new Error(`receipt: ${did} is not a party to ${r.a} ${r.b}`);
}

/** Whether did's signature on r verifies (the other may be missing). */
export function verifySigner(r, did) {
  const sig = did === r.a ? r.sig_a : did === r.b ? r.sig_b : undefined;
  if (!sig || sig.length !== 64) return false;
  try {
    return ed25519.verify(sig, concat(signaturePrefix, signingBytes(r)), publicKeyFromDID(did), { zip215: false });
  } catch {
    return false;
  }
}

/** Checks form and every signature; a co-signed receipt needs both. */
export function verifyReceipt(r) {
  checkReceipt(r);
  for (const [did, sig, side] of [[r.a, r.sig_a, 'a'], [r.b, r.sig_b, 'b']]) {
    if (!sig) {
      if (r.disputed) continue;
      throw new Error(`receipt: signature does not verify: sig_${side} is missing`);
    }
    if (!verifySigner(r, did)) throw new Error(`receipt: signature does not verify: sig_${side} by ${did}`);
  }
}

/** did's own figures. */
export const sideOf = (r, did) => (did === r.a ? r.counts_a : r.counts_b);

/** The receipt as `fleetmesh receipts --json` prints it (receipt.JSON). */
export function receiptJSON(r) {
  return {
    cid: cidString(receiptCID(r)), v: r.v, a: r.a, b: r.b, window_start: r.window_start, window_secs: r.window_secs, seq: r.seq,
    prev: r.prev ? cidString(r.prev) : null, counts_a: r.counts_a, counts_b: r.counts_b, disputed: r.disputed, settlement: null,
    sig_a: r.sig_a ? b64u(r.sig_a) : '', sig_b: r.sig_b ? b64u(r.sig_b) : '', raw: b64u(encodeReceipt(r)),
  };
}

/** The chain position after head h (null: none yet). */
export function nextPosition(h) {
  return h ? { seq: h.seq + 1, prev: receiptCID(h) } : { seq: 1, prev: null };
}

/**
 * The body of a proposal (exchange.ProposeBody, as Go's encoding/json
 * writes it: bytes as standard base64).
 */
export function proposeBody(h, start, secs, mine, round, bounds = DefaultBounds) {
  const { seq, prev } = nextPosition(h);
  const body = { window_start: start, window_secs: secs, seq, prev: prev ? b64std(prev) : null, counts: mine };
  if (h) body.head = b64std(encodeReceipt(h));
  body.round = round;
  body.bounds = { tolerance: bounds.tolerance, slack: bounds.slack };
  return body;
}

/**
 * Checks the other side's figures against the checker's own for one
 * window within the bounds, as exchange.Agree: "" or what disagrees.
 */
export function agree(mine, theirs, b) {
  const cmp = (what, own, other) => {
    for (const name of countNames) {
      const x = own[name];
      const y = other[name];
      const diff = Math.abs(x - y);
      let allowed = b.slack;
      if (name === 'bytes') {
        let per = slackEventBytes;
        if (own.events > 0) per = Math.min(per, Math.floor((own.bytes + own.events - 1) / own.events));
        allowed = b.slack * per;
      } else if (name === 'circuit_bytes') {
        allowed = b.slack * circuitSlackBytes;
      }
      if (diff > Math.max(Math.floor(b.tolerance * x), allowed)) return `${what} ${name}: ${x} here against ${y}`;
    }
    return '';
  };
  return cmp('this side gave / the other received', mine.gave, theirs.received) || cmp('the other gave / this side received', mine.received, theirs.gave);
}

const sameSide = (x, y) => countNames.every((n) => x.gave[n] === y.gave[n] && x.received[n] === y.received[n]);

/** The proposer refused the figures the responder signed. */
export class Disagreement extends Error {
  constructor(window, theirs, reason) {
    super(`window ${window}: the other side's figures disagree with this side's meter: ${reason}`);
    this.window = window;
    this.theirs = theirs;
    this.reason = reason;
  }
}

/**
 * The proposer's check of the responder's signed receipt (the body of a
 * sign message), as exchange.CheckSigned: the pair, a chain receipt the
 * proposer has not signed, the responder's signature, the position after
 * head h, the window length, the proposer's own figures exactly as
 * mine(window) returns them, and the responder's within the bounds
 * (else a Disagreement).
 */
export function checkSigned(body, proposer, responder, h, secs, bounds, mine) {
  if (!body || typeof body.receipt !== 'string') throw new Error('sign body has no receipt');
  const r = decodeReceipt(unb64std(body.receipt));
  const [a, b] = pairOf(proposer, responder);
  const own = proposer === r.b ? r.sig_b : r.sig_a;
  if (r.a !== a || r.b !== b || r.disputed || own !== undefined) throw new Error(`signed receipt is for ${r.a} ${r.b}, disputed ${r.disputed}`);
  if (!verifySigner(r, responder)) throw new Error(`${responder}'s signature does not verify`);
  const want = nextPosition(h);
  const samePrev = want.prev === null ? r.prev === null : r.prev !== null && equalBytes(r.prev, want.prev);
  if (r.seq !== want.seq || !samePrev) throw new Error(`${responder} signed seq ${r.seq}, ${proposer}'s chain is at seq ${want.seq - 1}`);
  const m = mine(r.window_start);
  if (!m || !sameSide(sideOf(r, proposer), m) || r.window_secs !== secs) {
    throw new Error(`${responder} signed window ${r.window_start} with figures for ${proposer} that it does not hold`);
  }
  const why = agree(m, sideOf(r, responder), bounds);
  if (why) throw new Disagreement(r.window_start, sideOf(r, responder), why);
  return r;
}

/**
 * The disputed receipt the side (did, seed) records for a window it could
 * not agree on with peer: both sides' figures (the peer's as last heard,
 * zero if never), outside the chain, signed by that side alone.
 */
export function disputedReceipt(did, seed, peer, start, secs, mine, theirs) {
  const [a, b] = pairOf(did, peer);
  const other = theirs || zeroSide();
  const r = newReceipt(a, b, start, secs, 0, null, a === did ? mine : other, a === did ? other : mine);
  r.disputed = true;
  signReceipt(r, did, seed);
  return r;
}
