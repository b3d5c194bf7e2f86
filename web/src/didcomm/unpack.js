// Unpacking: opens every envelope, verifies what it claims and applies the
// receiver rules the Go Unpacker applies (didcomm/unpack.go): `from` is
// the DID of the authcrypt sender key and of every signer, `to` names the
// recipient when present, expired and future-dated messages and replays
// are refused, oversized input is refused before parsing. Every refusal
// is a Problem carrying its report-problem 2.0 code.
import { utf8Decode, utf8Encode } from './bytes.js';
import { didOf } from './didkey.js';
import { AlgAnon, AlgAuth, decrypt } from './jwe.js';
import { verify } from './jws.js';
import { validate } from './message.js';
import { ModeAnoncrypt, ModeAuthcrypt, ModePlaintext, ModeSigned } from './pack.js';
import { CodeExpired, CodeMalformed, CodeNotRecipient, CodeReplay, CodeSenderMismatch, CodeTooBig, problem } from './problem.js';

/** The Go package's default limits (didcomm.DefaultLimits). */
export const DefaultLimits = Object.freeze({
  maxMessageBytes: 1 << 20,
  maxRecipients: 16,
  maxSignatures: 4,
  maxNesting: 3,
  clockSkewSecs: 300,
});

/**
 * Remembers the (sender, id) of messages accepted within a window and
 * refuses a second copy; messages created before the window are refused as
 * stale. Bounded: past maxEntries the oldest are forgotten early.
 */
export class ReplayGuard {
  constructor(windowSecs = 600, maxEntries = 100_000) {
    this.windowSecs = windowSecs;
    this.max = maxEntries;
    /** @type {Map<string, number>} key → when it may be forgotten (Unix s) */
    this.seen = new Map();
  }

  check(sender, id, created, now) {
    if (created > 0 && created < now - this.windowSecs) {
      throw problem(CodeExpired, `message ${id} was created ${now - created}s ago, before the replay window of ${this.windowSecs}s`);
    }
    for (const [k, exp] of this.seen) {
      if (now < exp && this.seen.size < this.max) break;
      this.seen.delete(k);
    }
    const key = sender + '\u0000' + id;
    if (this.seen.has(key)) throw problem(CodeReplay, `message ${id} from ${JSON.stringify(sender)} was already received`);
    this.seen.set(key, now + this.windowSecs);
  }
}

function sniff(text) {
  const t = text.trimStart();
  if (!t.startsWith('{')) throw problem(CodeMalformed, 'not a JSON object');
  let top;
  try {
    top = JSON.parse(t);
  } catch (e) {
    throw problem(CodeMalformed, `not a JSON object: ${e.message}`);
  }
  if (!top || typeof top !== 'object' || Array.isArray(top)) throw problem(CodeMalformed, 'not a JSON object');
  if ('ciphertext' in top) return [ModeAnoncrypt, top];
  if ('payload' in top) return [ModeSigned, top];
  if ('type' in top) return [ModePlaintext, top];
  throw problem(CodeMalformed, 'neither a plaintext, a JWS nor a JWE');
}

/** Unpacks messages addressed to one DID. */
export class Unpacker {
  /**
   * @param {import('./index.js').Secrets|null} secrets null unpacks only plaintext and signed messages
   * @param {import('./index.js').Resolver} resolver
   * @param {{limits?: object, replay?: ReplayGuard, now?: () => number}} [opts] now returns Unix seconds
   */
  constructor(secrets, resolver, opts = {}) {
    this.secrets = secrets;
    this.resolver = resolver;
    this.limits = { ...DefaultLimits, ...(opts.limits || {}) };
    this.replay = opts.replay || null;
    this.now = opts.now || (() => Math.floor(Date.now() / 1000));
  }

  /**
   * Opens every envelope of data and returns the plaintext message and
   * what the envelopes proved. Throws a Problem.
   * @param {string|Uint8Array} data
   * @returns {import('./index.js').Unpacked}
   */
  unpack(data) {
    const bytes = typeof data === 'string' ? utf8Encode(data) : data;
    const lim = this.limits;
    if (bytes.length > lim.maxMessageBytes) throw problem(CodeTooBig, `message is ${bytes.length} bytes, the limit is ${lim.maxMessageBytes}`);
    let cur;
    try {
      cur = utf8Decode(bytes);
    } catch {
      throw problem(CodeMalformed, 'message is not UTF-8');
    }
    const out = { message: null, plaintext: '', mode: '', encrypted: false, authenticated: false, nonRepudiable: false, senderKID: '', signerKIDs: [], recipientKID: '', enc: '' };
    for (let depth = 0; ; depth++) {
      if (depth > lim.maxNesting) throw problem(CodeMalformed, `more than ${lim.maxNesting} nested envelopes`);
      const [kind, obj] = sniff(cur);
      if (depth === 0) out.mode = kind;
      if (kind === ModePlaintext) return this.#finish(out, cur, obj);
      if (kind === ModeSigned) {
        const v = verify(obj, this.resolver, lim.maxSignatures);
        out.nonRepudiable = true;
        out.signerKIDs.push(...v.signers);
        try {
          cur = utf8Decode(v.payload);
        } catch {
          throw problem(CodeMalformed, 'signed payload is not UTF-8');
        }
        if (sniff(cur)[0] !== ModePlaintext) throw problem(CodeMalformed, 'a signed message must carry a plaintext');
        continue;
      }
      if (out.nonRepudiable) throw problem(CodeMalformed, 'encryption inside a signature');
      const d = decrypt(obj, this.secrets, this.resolver, lim.maxRecipients);
      if (out.senderKID !== '' && d.alg === AlgAnon) throw problem(CodeMalformed, 'anoncrypt inside authcrypt');
      if (depth === 0 && d.alg === AlgAuth) out.mode = ModeAuthcrypt;
      out.encrypted = true;
      out.enc = d.enc;
      out.recipientKID = d.recipientKID;
      if (d.senderKID !== '') {
        if (out.senderKID !== '') throw problem(CodeMalformed, 'authcrypt inside authcrypt');
        out.senderKID = d.senderKID;
      }
      try {
        cur = utf8Decode(d.payload);
      } catch {
        throw problem(CodeMalformed, 'decrypted payload is not UTF-8');
      }
    }
  }

  #finish(out, plain, m) {
    validate(m);
    out.message = m;
    out.plaintext = plain;
    if (out.senderKID !== '') {
      if (!m.from || didOf(out.senderKID) !== m.from) throw problem(CodeSenderMismatch, `from ${JSON.stringify(m.from || '')} is not the DID of the sender key ${out.senderKID}`);
      out.authenticated = true;
    }
    for (const s of out.signerKIDs) {
      if (!m.from || didOf(s) !== m.from) throw problem(CodeSenderMismatch, `from ${JSON.stringify(m.from || '')} is not the DID of the signer ${s}`);
      out.authenticated = true;
    }
    if (out.encrypted && Array.isArray(m.to) && m.to.length > 0 && !m.to.includes(didOf(out.recipientKID))) {
      throw problem(CodeNotRecipient, `to ${JSON.stringify(m.to)} does not name ${didOf(out.recipientKID)}`);
    }
    const now = this.now();
    if (m.expires_time > 0 && now > m.expires_time) throw problem(CodeExpired, `message ${m.id} expired at ${m.expires_time}`);
    if (m.created_time > 0 && m.created_time > now + this.limits.clockSkewSecs) throw problem(CodeExpired, `message ${m.id} is created in the future (${m.created_time})`);
    if (this.replay) this.replay.check(out.authenticated ? m.from : '', m.id, m.created_time || 0, now);
    return out;
  }
}
