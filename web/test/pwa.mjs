// Drives the browser leaf in Debian's chromium (playwright-core, no
// browser download) against real fleetmesh nodes, for e2e.TestBrowserLeaf.
//   node --experimental-websocket pwa.mjs '{"home":"http://127.0.0.1:P","other":"ws://127.0.0.1:Q","shots":"DIR"}'
// It prints one JSON line of what it saw; the Go test checks the nodes.
// Midway it prints {"ask":{"didcomm":DID}} and waits for the Go test to
// send the browser leaf a DIDComm message from a Go leaf and answer
// {"from":GO_LEAF_DID} on stdin.
//
// Steps: open /app/ (identity shown, paired with the node by DIDComm),
// a profile name, publish a note; follow a second user; close the page,
// have that user publish on the other node and the Go leaf send a DIDComm
// message, reopen (the note must come by negentropy, the message by
// pickup) and message the Go leaf back; offline: two notes, reload from the
// service worker, back online (both sent); the boundary (a note carrying
// the app's own secret key is refused and no frame carries it);
// screenshots of feed, compose and status at phone and desktop sizes.
import { chromium } from 'playwright-core';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { nsecEncode } from 'nostr-tools/nip19';
import { bytesToHex } from '@noble/hashes/utils.js';
import { createInterface } from 'node:readline';

const args = JSON.parse(process.argv[2]);
const app = `${args.home}/app/`;
const result = { steps: [] };
const t0 = Date.now();
const step = (name, data = {}) => { result.steps.push(`${name} ${Date.now() - t0}ms`); Object.assign(result, data); };
const TIMEOUT = 60000;

// Every frame the page sends over WebSocket and every fetch body, kept in
// the page for the boundary check.
const recordWire = () => {
  window.__wire = [];
  window.__sockets = [];
  const WS = WebSocket;
  window.WebSocket = class extends WS {
    constructor(...a) { super(...a); window.__sockets.push(this); }
  };
  const send = WS.prototype.send;
  WebSocket.prototype.send = function (d) { window.__wire.push(String(d)); return send.call(this, d); };
  const f = window.fetch;
  window.fetch = function (input, init) { if (init?.body) window.__wire.push(String(init.body)); return f.call(this, input, init); };
};

// ask prints a request for the Go test on stdout and resolves with its
// one-line JSON answer on stdin.
const rl = createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
async function ask(req) {
  console.log(JSON.stringify({ ask: req }));
  const { value, done } = await lines.next();
  if (done) throw new Error('the Go test closed stdin');
  return JSON.parse(value);
}

// publishElsewhere signs a note with sk and publishes it to url.
async function publishElsewhere(url, sk, content) {
  const ev = finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content }, sk);
  const ws = new WebSocket(url);
  await new Promise((res, rej) => { ws.onopen = res; ws.onerror = () => rej(new Error(`cannot reach ${url}`)); });
  const ok = await new Promise((res) => {
    ws.onmessage = (m) => { const msg = JSON.parse(m.data); if (msg[0] === 'OK' && msg[1] === ev.id) res(msg); };
    ws.send(JSON.stringify(['EVENT', ev]));
  });
  ws.close();
  if (!ok[2]) throw new Error(`publish to ${url} refused: ${ok[3]}`);
  return ev;
}

// open loads the app in ctx and waits for it to be ready.
async function open(ctx) {
  const page = await ctx.newPage();
  page.on('pageerror', (e) => { result.pageErrors = [...(result.pageErrors || []), String(e)]; });
  await page.goto(app, { timeout: TIMEOUT });
  await page.waitForSelector('body[data-ready=true]', { timeout: TIMEOUT });
  return page;
}

const status = (page, key) => page.locator(`[data-status=${key}]`).textContent();
const waitStatus = (page, key, want) => page.waitForFunction(
  ([k, w]) => document.querySelector(`[data-status=${k}]`)?.textContent.startsWith(w), [key, want], { timeout: TIMEOUT });

async function compose(page, text) {
  await page.click('nav >> text=Compose');
  const n = Number(await page.locator('#compose-msg').getAttribute('data-n'));
  await page.fill('#note', text);
  await page.click('button:has-text("Publish")');
  await page.waitForFunction((k) => Number(document.querySelector('#compose-msg')?.dataset.n) > k, n, { timeout: TIMEOUT });
  return page.locator('#compose-msg').textContent();
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-gpu', '--no-first-run'],
});
try {
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 } });
  await ctx.addInitScript(recordWire);
  let page = await open(ctx);
  await page.click('nav >> text=Identity');
  await page.waitForFunction(() => /^did:key:z6Mk/.test(document.querySelector('#did')?.textContent || ''), null, { timeout: TIMEOUT });
  // Paired with the node that served the app, by DIDComm.
  await page.waitForFunction(() => document.querySelectorAll('.homes li').length === 1, null, { timeout: TIMEOUT });
  const homeDID = await page.locator('.homes li code').textContent();
  const npub = await page.locator('#npub').textContent();
  step('identity', { did: await page.locator('#did').textContent(), npub, homeDID });
  await page.click('nav >> text=Profile');
  await page.fill('#name', 'pwa tester');
  await page.click('button:has-text("Save name")');
  await page.click('nav >> text=Status');
  await waitStatus(page, 'online', 'online');

  // Publish a note and see it acknowledged (the outbox empties).
  const note = `pwa note ${Date.now()}`;
  await compose(page, note);
  await page.click('nav >> text=Status');
  await waitStatus(page, 'outbox', '0 waiting');
  result.pubkey = await page.evaluate(async () => {
    const r = indexedDB.open('fleetmesh-app');
    const d = await new Promise((res) => { r.onsuccess = () => res(r.result); });
    const all = await new Promise((res) => { const q = d.transaction('events').objectStore('events').getAll(); q.onsuccess = () => res(q.result); });
    return all.find((e) => e.kind === 1)?.pubkey;
  });
  step('published', { note });

  // Follow a user who publishes elsewhere in the mesh while the page is
  // closed; the reopened page fetches the note by negentropy.
  const other = generateSecretKey();
  await page.click('nav >> text=Profile');
  await page.fill('#follow', getPublicKey(other));
  await page.click('button:has-text("Follow")');
  await page.waitForFunction(() => document.querySelectorAll('.follows li').length === 1, null, { timeout: TIMEOUT });
  await page.click('nav >> text=Status');
  await waitStatus(page, 'outbox', '0 waiting');
  await page.close();
  // While the page is closed: a DIDComm message from the Go leaf.
  const goLeaf = await ask({ didcomm: result.did });
  const elsewhere = await publishElsewhere(args.other, other, `from elsewhere ${Date.now()}`);
  // Wait until the mesh has brought it to the home.
  const homeWS = args.home.replace(/^http/, 'ws');
  for (let i = 0; ; i++) {
    const ws = new WebSocket(homeWS);
    await new Promise((res) => { ws.onopen = res; });
    const got = await new Promise((res) => {
      ws.onmessage = (m) => { const msg = JSON.parse(m.data); if (msg[0] === 'EVENT') res(true); if (msg[0] === 'EOSE') res(false); };
      ws.send(JSON.stringify(['REQ', 'w', { ids: [elsewhere.id] }]));
    });
    ws.close();
    if (got) break;
    if (i > 120) throw new Error('the note published elsewhere never reached the home');
    await new Promise((r) => setTimeout(r, 500));
  }
  page = await open(ctx);
  await page.waitForSelector(`.feed li[data-id="${elsewhere.id}"]`, { timeout: TIMEOUT });
  const negFrames = await page.evaluate(() => window.__wire.filter((f) => f.startsWith('["NEG-OPEN"') || f.startsWith('["NEG-MSG"')).length);
  // The DIDComm message sent while closed was picked up on open.
  await page.click('nav >> text=Messages');
  await page.waitForSelector(`.messages li[data-from="${goLeaf.from}"]`, { timeout: TIMEOUT });
  const pickedUp = await page.locator(`.messages li[data-from="${goLeaf.from}"] .note`).first().textContent();
  // And one back to the Go leaf, through the same home.
  const reply = `reply from the browser ${Date.now()}`;
  await page.fill('#msg-to', goLeaf.from);
  await page.fill('#msg-text', reply);
  await page.click('button:has-text("Send")');
  await page.waitForFunction(() => /^Sent /.test(document.querySelector('#msg-status')?.textContent || ''), null, { timeout: TIMEOUT });
  const sent = await page.locator('#msg-status').textContent();
  await page.click('nav >> text=Feed');
  const ownName = await page.locator('.feed li .who:has-text("pwa tester")').first().textContent({ timeout: TIMEOUT });
  await page.click('nav >> text=Status');
  step('reopened', { pickedUp, reply, sent, ownName, elsewhere: elsewhere.id, negFrames, method: await status(page, 'last-catchup') });

  // Offline: two notes, a reload (the shell from the service worker),
  // back online: both sent.
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: TIMEOUT });
  await ctx.setOffline(true);
  const offline = [`offline one ${Date.now()}`, `offline two ${Date.now()}`];
  for (const n of offline) await compose(page, n);
  await page.reload({ timeout: TIMEOUT });
  await page.waitForSelector('body[data-ready=true]', { timeout: TIMEOUT });
  const fromSW = await page.evaluate(() => navigator.serviceWorker.controller !== null);
  await page.click('nav >> text=Status');
  await waitStatus(page, 'outbox', '2 waiting');
  const offlineShown = await status(page, 'online');
  await page.click('nav >> text=Feed');
  await page.waitForSelector('.feed li', { timeout: TIMEOUT });
  const cachedFeed = await page.locator('.feed li').count();
  await ctx.setOffline(false);
  await page.click('nav >> text=Status');
  await waitStatus(page, 'outbox', '0 waiting');
  step('offline', { offline, fromSW, offlineShown, cachedFeed });

  // The boundary: the app's own secret, typed into a note, is refused and
  // never crosses the wire.
  const sk = await page.evaluate(async () => {
    const r = indexedDB.open('fleetmesh-app');
    const d = await new Promise((res) => { r.onsuccess = () => res(r.result); });
    const v = await new Promise((res) => { const q = d.transaction('meta').objectStore('meta').get('nostr_sk'); q.onsuccess = () => res(q.result); });
    return Array.from(v);
  });
  const skBytes = Uint8Array.from(sk);
  const secrets = [bytesToHex(skBytes), nsecEncode(skBytes)];
  const refusals = [];
  for (const text of [`my key ${secrets[1]}`, `hex ${secrets[0]}`, `split ${secrets[1].slice(0, 20)} ${secrets[1].slice(20)}`]) {
    refusals.push(await compose(page, text));
  }
  const wire = await page.evaluate(() => window.__wire);
  const flat = (s) => s.toLowerCase().replace(/[^a-z0-9]/g, '');
  const leaked = wire.filter((f) => secrets.some((s) => flat(f).includes(flat(s)))).length;
  step('boundary', { refusals, leaked, wireFrames: wire.length, secretsTried: secrets.length });

  // Screenshots of feed, compose and status at phone and desktop sizes.
  const shots = [];
  for (const [size, vp] of [['phone', { width: 390, height: 844 }], ['desktop', { width: 1280, height: 800 }]]) {
    await page.setViewportSize(vp);
    for (const v of ['feed', 'compose', 'status']) {
      await page.click(`nav >> a[href="#${v}"]`);
      await page.waitForSelector(`main[data-view=${v}]`);
      const path = `${args.shots}/pwa-${v}-${size}.png`;
      await page.screenshot({ path, fullPage: true });
      shots.push(path);
    }
  }
  step('screenshots', { shots });

  // Hidden: no socket open 30 s later (the page's clock is run forward);
  // shown again: a catch-up.
  page = await ctx.newPage();
  await page.clock.install();
  await page.goto(app, { timeout: TIMEOUT });
  await page.waitForSelector('body[data-ready=true]', { timeout: TIMEOUT });
  await page.click('nav >> text=Status');
  await waitStatus(page, 'online', 'online');
  const setVisibility = (v) => page.evaluate((state) => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => state });
    document.dispatchEvent(new Event('visibilitychange'));
  }, v);
  const openSockets = () => page.evaluate(() => window.__sockets.filter((w) => w.readyState <= 1).length);
  const openBefore = await openSockets();
  const catchupBefore = await status(page, 'last-catchup');
  await setVisibility('hidden');
  await page.clock.runFor(30000);
  await page.waitForFunction(() => window.__sockets.every((w) => w.readyState >= 2), null, { timeout: TIMEOUT });
  const openHidden = await openSockets();
  await page.clock.runFor(2000);
  await setVisibility('visible');
  await waitStatus(page, 'online', 'online');
  await page.waitForFunction((b) => document.querySelector('[data-status=last-catchup]')?.textContent !== b, catchupBefore, { timeout: TIMEOUT });
  step('hidden', { openBefore, openHidden, openShown: await openSockets() });
  await ctx.close();

  // A NIP-07 signer in the browser signs instead of a local key.
  const ext = generateSecretKey();
  const ctx7 = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await ctx7.exposeBinding('__nip07sign', (_src, t) => finalizeEvent(t, ext));
  await ctx7.addInitScript((pk) => {
    window.nostr = { getPublicKey: async () => pk, signEvent: (t) => window.__nip07sign(t) };
  }, getPublicKey(ext));
  page = await open(ctx7);
  await page.click('nav >> text=Identity');
  const nip07Kind = await page.locator('#npub').locator('xpath=..').textContent();
  await page.click('nav >> text=Status');
  await waitStatus(page, 'online', 'online');
  const nip07Note = `signed by the extension ${Date.now()}`;
  await compose(page, nip07Note);
  await page.click('nav >> text=Status');
  await waitStatus(page, 'outbox', '0 waiting');
  await ctx7.close();
  step('nip07', { nip07Pubkey: getPublicKey(ext), nip07Note, nip07Kind });
  console.log(JSON.stringify(result));
} catch (e) {
  console.log(JSON.stringify({ ...result, error: String(e.stack || e) }));
  process.exitCode = 1;
} finally {
  rl.close();
  await browser.close();
}
