// Loads a node's operator dashboard in Debian's chromium (playwright-core,
// no browser download), reports its headline and what each panel draws as one
// JSON line, and
// saves a screenshot.
//   node shot.mjs URL SCREENSHOT.png
//
// The page reloads itself (meta refresh, once per sample interval, as
// little as a second), so on a loaded machine a reload can start between
// any two steps here. The title and the panels are therefore read in one
// evaluate (one task of the page: no reload lands inside it), and a read
// that a reload interrupts starts again from a loaded page.
import { chromium } from 'playwright-core';

const [url, shot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

const read = () => ({
  title: document.title,
  headline: Object.fromEntries([...document.querySelectorAll('.headline tr')].map((r) => [
    r.getAttribute('data-fact'),
    { value: r.querySelector('.value')?.textContent || '', state: r.querySelector('.state')?.textContent || '',
      tone: r.className, shown: r.getBoundingClientRect().height > 0 },
  ])),
  panels: [...document.querySelectorAll('.panel')].map((el) => ({
    title: el.getAttribute('data-panel'),
    exported: !!el.querySelector('svg'),
    lines: [...el.querySelectorAll('polyline')].map((p) => ({
      name: p.querySelector('title')?.textContent || '',
      points: Number(p.getAttribute('data-points')),
      max: Number(p.getAttribute('data-max')),
      drawn: p.getBoundingClientRect().width > 0,
    })),
  })),
});

try {
  const page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
  // The screenshot is taken of a page that holds still: the page as the
  // node served it, less its meta refresh, which on a loaded machine
  // reloads it faster than chromium renders a full-page screenshot.
  await page.route(url, async (route) => {
    const r = await route.fetch();
    const body = (await r.text()).replace(/<meta http-equiv="refresh"[^>]*>/, '');
    await route.fulfill({ response: r, body });
  });
  const resp = await page.goto(url, { waitUntil: 'load', timeout: 120000 });
  let got;
  let lastErr;
  for (let attempt = 0; attempt < 10 && !got; attempt++) {
    try {
      await page.waitForLoadState('load', { timeout: 120000 });
      const r = await page.evaluate(read);
      // A document still being replaced has no panels yet.
      if (r.panels.length > 0) got = r;
    } catch (e) {
      lastErr = e; // "Execution context was destroyed": a reload began
    }
  }
  if (!got) throw lastErr || new Error('the page never showed its panels');
  await page.waitForLoadState('load', { timeout: 120000 });
  await page.screenshot({ path: shot, fullPage: true, timeout: 120000 });
  console.log(JSON.stringify({ status: resp.status(), title: got.title, headline: got.headline, panels: got.panels }));
} finally {
  await browser.close();
}
