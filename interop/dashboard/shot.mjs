// Loads a node's operator dashboard in Debian's chromium (playwright-core,
// no browser download), reports what each panel draws as one JSON line, and
// saves a screenshot.
//   node shot.mjs URL SCREENSHOT.png
import { chromium } from 'playwright-core';

const [url, shot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
  const resp = await page.goto(url, { waitUntil: 'load', timeout: 120000 });
  const panels = await page.$$eval('.panel', (els) => els.map((el) => ({
    title: el.getAttribute('data-panel'),
    exported: !!el.querySelector('svg'),
    lines: [...el.querySelectorAll('polyline')].map((p) => ({
      name: p.querySelector('title')?.textContent || '',
      points: Number(p.getAttribute('data-points')),
      max: Number(p.getAttribute('data-max')),
      drawn: p.getBoundingClientRect().width > 0,
    })),
  })));
  await page.screenshot({ path: shot, fullPage: true });
  console.log(JSON.stringify({ status: resp.status(), title: await page.title(), panels }));
} finally {
  await browser.close();
}
