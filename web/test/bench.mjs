// The browser leaf's benchmark (docs/benchmarks/pwa.md), run by
// e2e.TestPWABenchmark against a real node:
//   node --experimental-websocket bench.mjs '{"home":"http://127.0.0.1:P"}'
// It prints one JSON line:
//   shell: the app shell's files and their gzipped size (no wasm);
//   catchup: the 200 newest of 10,000 stored notes missing, caught up by
//     negentropy (the app's RelayConn.reconcile, then REQ by ids) against
//     plain since REQs, and both when already in sync: rounds and bytes;
//   offline: the second load with the browser offline, 4x CPU throttling
//     (CDP) and none, alternately, time until the cached feed shows and
//     until the app is ready; offlineSummary: their medians and spread.
import * as esbuild from 'esbuild';
import { chromium } from 'playwright-core';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { readdirSync, readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

const args = JSON.parse(process.argv[2]);
const relayURL = args.home.replace(/^http/, 'ws');
const out = {};

// The app shell: every file the service worker caches, and the worker.
const dist = new URL('../dist/', import.meta.url);
out.shell = { files: {}, gzipBytes: 0, wasm: false };
for (const f of readdirSync(dist).sort()) {
  const gz = gzipSync(readFileSync(new URL(f, dist)), { level: 9 }).length;
  out.shell.files[f] = gz;
  out.shell.gzipBytes += gz;
  if (f.endsWith('.wasm')) out.shell.wasm = true;
}

// The app's relay client, bundled for Node as build.mjs bundles it.
const relayJS = join(tmpdir(), `fleetmesh-relay-${process.pid}.mjs`);
await esbuild.build({
  entryPoints: [new URL('../src/app/relay.js', import.meta.url).pathname],
  bundle: true, format: 'esm', platform: 'neutral', outfile: relayJS, logLevel: 'warning',
  alias: { 'nostr-tools/nip77': new URL('../node_modules/nostr-tools/lib/esm/nip77.js', import.meta.url).pathname },
});
const { RelayConn } = await import(relayJS);

// publishAll signs count notes by sk, one second apart ending now, and
// publishes them pipelined; it returns them oldest first.
async function publishAll(sk, count, prefix) {
  const now = Math.floor(Date.now() / 1000);
  const evs = [];
  for (let i = 0; i < count; i++) {
    evs.push(finalizeEvent({ kind: 1, created_at: now - count + i + 1, tags: [], content: `${prefix} ${i}` }, sk));
  }
  const ws = new WebSocket(relayURL);
  await new Promise((res, rej) => { ws.onopen = res; ws.onerror = rej; });
  let oks = 0;
  let refused = 0;
  await new Promise((res) => {
    ws.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (msg[0] !== 'OK') return;
      if (!msg[2] && !String(msg[3]).startsWith('duplicate:')) refused++;
      if (++oks === count) res();
    };
    for (const e of evs) ws.send(JSON.stringify(['EVENT', e]));
  });
  ws.close();
  if (refused) throw new Error(`${refused} of ${count} notes refused`);
  return evs;
}

const measure = async (fn) => {
  const conn = new RelayConn(relayURL);
  await conn.connect();
  const r = await fn(conn);
  conn.close();
  const s = conn.stats;
  return { ...r, messagesOut: s.sent, messagesIn: s.received, bytes: s.bytesOut + s.bytesIn, bytesOut: s.bytesOut, bytesIn: s.bytesIn };
};

// Catch-up: 10,000 stored, the 200 newest missing.
const author = generateSecretKey();
const pk = getPublicKey(author);
const stored = await publishAll(author, 10000, 'bench');
const have = stored.slice(0, 9800);
const filter = { kinds: [1], authors: [pk] };
const byIDs = async (conn, ids) => {
  let got = 0;
  let reqs = 0;
  for (let i = 0; i < ids.length; i += 200) {
    got += (await conn.query([{ ids: ids.slice(i, i + 200) }])).length;
    reqs++;
  }
  return { got, reqs };
};
const negentropy = (local) => measure(async (conn) => {
  const need = await conn.reconcile(filter, local.map((e) => [e.created_at, e.id]));
  const { got, reqs } = await byIDs(conn, need);
  return { missing: need.length, fetched: got, negRounds: conn.stats.negRounds, reqs };
});
// since: one REQ from the newest note held (the exact case), and with the
// app's fallback slack of 600 s before it, paged by the relay's limit.
const since = (local, slack) => measure(async (conn) => {
  let until;
  let fetched = 0;
  let reqs = 0;
  const from = local[local.length - 1].created_at - slack;
  for (;;) {
    const f = { ...filter, since: from, limit: 500 };
    if (until) f.until = until;
    const evs = await conn.query([f]);
    reqs++;
    fetched += evs.length;
    if (evs.length < 500) break;
    until = Math.min(...evs.map((e) => e.created_at)) - 1;
  }
  return { fetched, reqs };
});
out.catchup = {
  stored: stored.length,
  missing: 200,
  negentropy: await negentropy(have),
  sinceExact: await since(have, 0),
  sinceSlack600: await since(have, 600),
  inSyncNegentropy: await negentropy(stored),
  inSyncSince: await since(stored, 0),
};

// Offline second load with 4x CPU throttling: the app follows a second
// author with 300 notes, caught up online; then offline, a new page,
// OFFLINE_RUNS times. The page is waited on from inside (a
// PerformanceObserver on the app's marks, through CDP), not with
// Playwright's selector engine, whose injected script would otherwise run
// in the page inside the interval measured. ms: navigation start to the
// 'feed-shown' mark (the first screen of the cached feed painted);
// readyMs: to the body's data-ready (keys, leaf and service worker up;
// null when it was set before the wait began).
const OFFLINE_RUNS = 10;
const WAIT_MARKS = `new Promise((resolve, reject) => {
  const shownAt = () => performance.getEntriesByName('feed-shown')[0]?.startTime;
  const ready = () => document.body?.dataset.ready === 'true';
  let readyMs = ready() ? null : undefined;
  let shown;
  const check = () => {
    if (readyMs === undefined && ready()) readyMs = Math.round(performance.now());
    if (shown === undefined && shownAt() !== undefined) shown = document.querySelectorAll('.feed li').length;
    if (shown === undefined || readyMs === undefined) return;
    obs.disconnect();
    mo.disconnect();
    clearTimeout(t);
    resolve({ ms: Math.round(shownAt()), readyMs, shown, shownLater: document.querySelectorAll('.feed li').length });
  };
  const obs = new PerformanceObserver(check);
  obs.observe({ type: 'mark' });
  const mo = new MutationObserver(check);
  mo.observe(document.body, { attributes: true, attributeFilter: ['data-ready'] });
  const t = setTimeout(() => reject(new Error('no feed-shown mark and ready body in 60 s')), 60000);
  check();
})`;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-gpu', '--no-first-run'],
});
try {
  const feedAuthor = generateSecretKey();
  await publishAll(feedAuthor, 300, 'feed');
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 } });
  let page = await ctx.newPage();
  await page.goto(`${args.home}/app/`);
  await page.waitForSelector('body[data-ready=true]');
  await page.click('nav >> text=Profile');
  await page.fill('#follow', getPublicKey(feedAuthor));
  await page.click('button:has-text("Follow")');
  await page.click('nav >> text=Feed');
  await page.waitForFunction(() => document.querySelectorAll('.feed li').length >= 200, null, { timeout: 120000 });
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 60000 });
  await page.close();
  await ctx.setOffline(true);
  const runs = [];
  for (let i = 0; i < OFFLINE_RUNS; i++) {
    // Alternately 4x throttled and not: the unthrottled runs are the
    // peer in the same run (this machine's load moves both).
    const rate = i % 2 === 0 ? 4 : 1;
    page = await ctx.newPage();
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('Emulation.setCPUThrottlingRate', { rate });
    await page.goto(`${args.home}/app/`);
    const { result, exceptionDetails } = await cdp.send('Runtime.evaluate', { expression: WAIT_MARKS, awaitPromise: true, returnByValue: true });
    if (exceptionDetails) throw new Error(`offline load: ${exceptionDetails.exception?.description || exceptionDetails.text}`);
    const fromSW = await page.evaluate(() => navigator.serviceWorker.controller !== null);
    runs.push({ rate, ...result.value, fromSW });
    await page.close();
  }
  const summary = (rate, key) => {
    const v = runs.filter((r) => r.rate === rate && r[key] != null).map((r) => r[key]).sort((a, b) => a - b);
    return { median: v[Math.floor(v.length / 2)], min: v[0], max: v[v.length - 1] };
  };
  out.offlineSummary = {
    feedShown: { throttled4x: summary(4, 'ms'), unthrottled: summary(1, 'ms') },
    appReady: { throttled4x: summary(4, 'readyMs'), unthrottled: summary(1, 'readyMs') },
  };
  out.offline = { runs, loadavg: loadavg().map((x) => x.toFixed(1)), cpus: cpus().length };
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
