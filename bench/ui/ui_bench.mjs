// ui_bench.mjs - page load times of each dashboard view (see ui_bench.sh).
import { createRequire } from 'node:module';
import path from 'node:path';
const require = createRequire(path.join(process.env.NODE_PATH, 'x.js'));
const puppeteer = require('puppeteer-core');

const URL = process.env.UI_URL;
const browser = await puppeteer.launch({
  executablePath: process.env.CHROME, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const page = await browser.newPage();
await page.setViewport({ width: 1600, height: 1000 });
await page.goto(URL, { waitUntil: 'load' });
await page.type('#token', process.env.UI_TOKEN);
await page.click('#login-form button');
await page.waitForSelector('#nav:not([hidden])');
const views = [['cluster', '#/cluster'], ['queue', '#/queue'], ['job', '#/job/5000'], ['tenants', '#/tenants'], ['services', '#/services'],
  ['history', '#/history/3600'], ['history 90d', '#/history/7776000', 'history'], ['node 7d', '#/node/node-0000/604800', 'node'],
  ['services 90d', '#/services/7776000', 'services']];
for (const [name, hash, loaded] of views) {
  const times = [];
  const inPage = []; // the page's own clock: navigation start to the view's data rendered
  for (let i = 0; i < 5; i++) {
    // a full page load each time: HTML, script, login from sessionStorage, data, render
    await page.goto('about:blank');
    const t0 = Date.now();
    await page.goto(URL + hash, { waitUntil: 'domcontentloaded' });
    await page.waitForFunction((n) => document.getElementById('view').getAttribute('data-loaded') === n,
      { timeout: 60000, polling: 'raf' }, loaded || name);
    times.push(Date.now() - t0);
    inPage.push(Number(await page.$eval('#view', (v) => v.dataset.firstMs)));
  }
  times.sort((a, b) => a - b);
  inPage.sort((a, b) => a - b);
  const n = await page.evaluate(() => document.querySelectorAll('.gpu, tbody tr, figure.plot').length);
  console.log(`  ${name.padEnd(10)} ${String(inPage[2]).padStart(6)} ms in page (min ${inPage[0]}, max ${inPage[4]}), ` +
    `${times[2]} ms as the driver saw it; ${n} GPU boxes/rows/charts`);
}
await browser.close();
