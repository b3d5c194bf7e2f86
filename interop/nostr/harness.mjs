// Test harness shared by the nostr-tools end-to-end scripts: a tiny TAP
// runner, nostr-tools set up for Node 20 (the `ws` package), and helpers for
// the few things nostr-tools has no API for (raw frames, CLOSED reasons).
//
// Every script is run as: node SCRIPT.mjs RELAY_URL [OPTIONS_JSON]
// It prints TAP, then one JSON summary line, and exits 1 if any test failed.

import WebSocket from 'ws';
import { Relay, useWebSocketImplementation } from 'nostr-tools/relay';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';

useWebSocketImplementation(WebSocket);

export const relayURL = process.argv[2];
export const options = JSON.parse(process.argv[3] || '{}') || {};
if (!relayURL) {
  console.error('usage: node SCRIPT.mjs ws://HOST:PORT [OPTIONS_JSON]');
  process.exit(2);
}

// The whole script is bounded: a hang is a failure, never a stuck test run.
const scriptDeadline = setTimeout(() => {
  console.log('Bail out! script exceeded ' + (options.scriptTimeoutMs || 90000) + ' ms');
  process.exit(3);
}, options.scriptTimeoutMs || 90000);

const tests = [];

// test registers a named test. fn receives an assertion object t with
// t.ok(cond, what, detail) and t.equal(got, want, what).
export function test(name, fn) {
  tests.push({ name, fn });
}

// run runs the registered tests in order and exits.
export async function run() {
  const script = process.argv[1].split('/').pop();
  const failures = [];
  console.log('TAP version 13');
  let n = 0;
  for (const { name, fn } of tests) {
    n++;
    const problems = [];
    const t = {
      ok(cond, what, detail) {
        if (!cond) problems.push(what + (detail === undefined ? '' : ': ' + stringify(detail)));
      },
      equal(got, want, what) {
        if (stringify(got) !== stringify(want)) problems.push(`${what}: got ${stringify(got)}, want ${stringify(want)}`);
      },
    };
    try {
      await fn(t);
    } catch (err) {
      problems.push('threw: ' + (err && err.stack ? err.stack : String(err)));
    }
    if (problems.length === 0) {
      console.log(`ok ${n} - ${name}`);
    } else {
      console.log(`not ok ${n} - ${name}`);
      for (const p of problems) console.log('  # ' + p.replaceAll('\n', '\n  # '));
      failures.push({ test: name, problems });
    }
  }
  console.log(`1..${n}`);
  console.log(JSON.stringify({ script, relay: relayURL, tests: n, failed: failures.length, failures }));
  clearTimeout(scriptDeadline);
  process.exit(failures.length ? 1 : 0);
}

// stringify is JSON with object keys sorted, so equal events compare equal
// whatever order a relay wrote their fields in.
function stringify(v) {
  const sortKeys = (x) => (Array.isArray(x) ? x.map(sortKeys)
    : x && typeof x === 'object' ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, sortKeys(x[k])])) : x);
  try { return JSON.stringify(sortKeys(v)); } catch { return String(v); }
}

// expectPrefix checks a NIP-01 machine-readable message: it starts with one
// of the prefixes and has a non-empty human-readable part after it.
export function expectPrefix(t, msg, prefixes, what) {
  const list = Array.isArray(prefixes) ? prefixes : [prefixes];
  const p = list.find((x) => typeof msg === 'string' && msg.startsWith(x));
  t.ok(p !== undefined, `${what}: message starts with ${list.join(' or ')}`, msg);
  if (p !== undefined) t.ok(msg.slice(p.length).trim().length > 0, `${what}: message has text after "${p}"`, msg);
}

// A Nostr user: a fresh secp256k1 key that signs event templates.
export function newUser() {
  const sk = generateSecretKey();
  const pk = getPublicKey(sk);
  return {
    sk,
    pk,
    event({ kind = 1, content = '', tags = [], created_at = now() } = {}) {
      return finalizeEvent({ kind, content, tags, created_at }, sk);
    },
  };
}

export const now = () => Math.floor(Date.now() / 1000);

// connect opens a nostr-tools Relay. EOSE must come from the relay: the
// library's own EOSE timeout is pushed out of the way.
export async function connect() {
  const relay = await Relay.connect(relayURL);
  relay.baseEoseTimeout = 600000;
  relay.publishTimeout = 10000;
  relay.onnotice = (msg) => relay.notices.push(msg);
  relay.notices = [];
  return relay;
}

// publish sends an event and returns {ok, message} from the relay's OK.
export async function publish(relay, event) {
  try {
    const message = await relay.publish(event);
    return { ok: true, message };
  } catch (err) {
    if (/timed out/.test(err.message)) throw new Error('no OK from relay for ' + event.id);
    return { ok: false, message: err.message };
  }
}

// query runs a subscription until the relay's EOSE and returns the stored
// events in the order the relay sent them. A CLOSED rejects with its reason.
export function query(relay, filters, timeoutMs = 10000) {
  return new Promise((resolve, reject) => {
    const events = [];
    const timer = setTimeout(() => { sub.close(); reject(new Error('no EOSE within ' + timeoutMs + ' ms for ' + stringify(filters))); }, timeoutMs);
    const sub = relay.subscribe(filters, {
      onevent: (e) => events.push(e),
      oninvalidevent: (e) => { clearTimeout(timer); reject(new Error('relay sent an event that does not match the filters or is badly signed: ' + stringify(e))); },
      oneose: () => { clearTimeout(timer); sub.close(); resolve(events); },
      onclose: (reason) => { clearTimeout(timer); if (!sub.eosed) reject(new ClosedError(reason)); },
    });
  });
}

export class ClosedError extends Error {
  constructor(reason) { super('CLOSED: ' + reason); this.reason = reason; }
}

// live opens a subscription that collects events after EOSE too.
export function live(relay, filters) {
  const state = { events: [], eose: false, closedReason: null };
  state.eosePromise = new Promise((resolve) => {
    state.sub = relay.subscribe(filters, {
      onevent: (e) => state.events.push(e),
      oneose: () => { state.eose = true; resolve(); },
      onclose: (reason) => { state.closedReason = reason; resolve(); },
    });
  });
  return state;
}

// pollUntil calls fn until it returns a truthy value or the deadline passes.
export async function pollUntil(fn, timeoutMs = 10000, intervalMs = 100) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// RawClient speaks to the relay with plain WebSocket frames, for what
// nostr-tools has no API for: malformed frames, exact CLOSED/NOTICE
// handling, oversized messages.
export class RawClient {
  static async open(url = relayURL) {
    const c = new RawClient();
    c.ws = new WebSocket(url, { maxPayload: 64 << 20 });
    c.messages = [];
    c.waiters = [];
    c.closed = new Promise((resolve) => c.ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    c.isClosed = false;
    c.closed.then(() => { c.isClosed = true; c.wake(); });
    c.ws.on('message', (data) => {
      let msg;
      try { msg = JSON.parse(data.toString()); } catch { msg = ['<unparseable>', data.toString()]; }
      c.messages.push(msg);
      c.wake();
    });
    await new Promise((resolve, reject) => { c.ws.once('open', resolve); c.ws.once('error', reject); });
    c.ws.on('error', () => {});
    return c;
  }

  wake() { for (const w of this.waiters.splice(0)) w(); }

  send(msg) { this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg)); }

  // next returns (and removes) the first received message matching pred,
  // waiting up to timeoutMs. It returns null on timeout or close.
  async next(pred, timeoutMs = 10000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.messages.findIndex(pred);
      if (i >= 0) return this.messages.splice(i, 1)[0];
      const left = deadline - Date.now();
      if (left <= 0 || this.isClosed) return null;
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }

  ok(id, timeoutMs) { return this.next((m) => m[0] === 'OK' && m[1] === id, timeoutMs); }

  // req sends a REQ and returns {events, end} where end is the EOSE or
  // CLOSED message that ended the stored part.
  async req(subID, filters, timeoutMs = 10000) {
    this.send(['REQ', subID, ...filters]);
    const events = [];
    for (;;) {
      const m = await this.next((x) => x[1] === subID && ['EVENT', 'EOSE', 'CLOSED'].includes(x[0]), timeoutMs);
      if (!m) return { events, end: null };
      if (m[0] === 'EVENT') { events.push(m[2]); continue; }
      return { events, end: m };
    }
  }

  close() { this.ws.close(); }
}
