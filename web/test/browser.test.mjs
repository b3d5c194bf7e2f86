// The leaf's modules in a real browser: Debian's Chromium, headless,
// driven by playwright-core (no downloaded browser), on a page serving an
// esbuild bundle of test/browser-entry.mjs. It checks that the modules
// bundle and run there, that the identity survives a second open from
// IndexedDB, that the seed's wrapping key is kept as a non-extractable
// CryptoKey, that idbStorage batches and orders, and DIDComm in the page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';

const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';

test('the leaf modules in headless Chromium', async (t) => {
  const bundle = await build({
    entryPoints: [fileURLToPath(new URL('./browser-entry.mjs', import.meta.url))],
    bundle: true,
    format: 'esm',
    write: false,
    logLevel: 'silent',
  });
  const js = bundle.outputFiles[0].contents;
  const server = createServer((req, res) => {
    if (req.url === '/entry.js') {
      res.writeHead(200, { 'Content-Type': 'text/javascript' });
      res.end(js);
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end('<!doctype html><title>leaf</title><script type="module" src="/entry.js"></script>');
  }).listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  t.after(() => browser.close());
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.waitForFunction(() => window.result !== undefined, null, { timeout: 30_000 });
  const r = await page.evaluate(() => window.result);
  assert.equal(r.error, undefined, r.error);
  assert.match(r.did, /^did:key:z6Mk/);
  assert.equal(r.didAgain, r.did, 'the same identity on the second open');
  assert.equal(r.keyType, 'CryptoKey');
  assert.equal(r.extractable, false);
  assert.equal(r.exported, 'refused');
  assert.equal(r.wrappedBytes, 48, 'the seed and its GCM tag');
  assert.deepEqual(r.entries, [['a', 1], ['b', 2]]);
  assert.equal(r.content, 'in the browser');
  assert.equal(r.authenticated, true);
});
