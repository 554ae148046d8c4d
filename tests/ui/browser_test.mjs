// browser_test.mjs - drive the system Chromium over the DevTools protocol
// (puppeteer-core; no browser download) through every dashboard view, as a
// user of tenant "ml". Set up by ui_test.sh; environment:
//   UI_URL UI_TOKEN UI_RUN (a running job printing ui-marker-ID)
//   UI_PEND (a job that cannot fit) UI_OTHER (another tenant's job)
//   UI_SHOTS (screenshot dir) CHROME (the browser)
// Each wait polls with a generous deadline; nothing depends on timing.
import puppeteer from 'puppeteer-core';
import path from 'node:path';

const env = (k) => {
  if (!process.env[k]) throw new Error(k + ' not set');
  return process.env[k];
};
const URL = env('UI_URL');
const TOKEN = env('UI_TOKEN');
const RUN = env('UI_RUN');
const PEND = env('UI_PEND');
const OTHER = env('UI_OTHER');
const SHOTS = env('UI_SHOTS');
const WAIT = 30000;

let passed = 0;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log('ok - ' + name);
  } catch (e) {
    failed++;
    console.log('not ok - ' + name + ': ' + (e && e.message ? e.message : e));
  }
}
function assert(c, msg) { if (!c) throw new Error(msg); }

const browser = await puppeteer.launch({
  executablePath: env('CHROME'),
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
const page = await browser.newPage();
await page.setViewport({ width: 1400, height: 1000 });
const problems = [];
page.on('pageerror', (e) => problems.push('page error: ' + e.message));
// The refused token and the other tenant's job answer 401/404 on purpose:
// the browser logs those loads; anything else logged as an error (a CSP
// violation, a script error) fails the test.
page.on('console', (m) => {
  if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push('console: ' + m.text());
});
const urls = [];
page.on('request', (r) => urls.push(r.url()));

async function shot(name) {
  await page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
}
async function view(hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForFunction((n) => document.getElementById('view').getAttribute('data-loaded') === n,
    { timeout: WAIT }, hash.replace(/^#\//, '').split('/')[0]);
}
const text = (sel) => page.$eval(sel, (e) => e.textContent);

await check('the page carries a strict CSP and nosniff', async () => {
  const r = await page.goto(URL, { waitUntil: 'load' });
  const h = r.headers();
  assert(/script-src 'self'/.test(h['content-security-policy'] || ''), 'no CSP: ' + h['content-security-policy']);
  assert(h['x-content-type-options'] === 'nosniff', 'no nosniff');
});

await check('a bad token is refused at the login form', async () => {
  await page.waitForSelector('#token', { visible: true, timeout: WAIT });
  await page.type('#token', 'crl_not-a-token');
  await page.click('#login-form button');
  await page.waitForFunction(() => document.getElementById('login-error').textContent.length > 0, { timeout: WAIT });
  await shot('login-refused');
});

await check('log in with a user token; the cluster map shows the nodes and GPUs', async () => {
  await page.type('#token', TOKEN);
  await page.click('#login-form button');
  await page.waitForSelector('#nav:not([hidden])', { timeout: WAIT });
  await page.waitForFunction(() => document.querySelectorAll('.gpu[data-node]').length >= 6, { timeout: WAIT });
  assert(await page.$('.node[data-node="h100-0"]'), 'no h100-0');
  assert(await page.$('.node[data-node="a30-0"]'), 'no a30-0');
  const states = await page.$$eval('.gpu[data-node="h100-0"]', (g) => g.map((x) => x.dataset.state));
  assert(states.length === 4, 'h100-0 shows ' + states.length + ' GPUs');
  assert(states.filter((s) => s === 'allocated').length === 2, 'allocated: ' + states.join(','));
  const a30 = await page.$$eval('.gpu[data-node="a30-0"]', (g) => g.map((x) => x.dataset.state + ':' + x.textContent));
  assert(a30.some((s) => s.startsWith('mig:') && s.includes('MIG 1/4')), 'no GPU shows its MIG slice in use: ' + a30.join(','));
  assert(!a30.some((s) => s.includes('vision')), "another tenant's name is shown: " + a30.join(','));
  const box = await text('.gpu[data-node="h100-0"][data-state="allocated"]');
  assert(box.includes('job ' + RUN), 'the allocated GPU names no job: ' + box);
  const who = await text('#who');
  assert(who.includes('ml'), 'whoami: ' + who);
  await shot('cluster');
});

await check('a click on an allocated GPU opens its job', async () => {
  await page.click('.gpu[data-node="h100-0"][data-job="' + RUN + '"]');
  await page.waitForFunction(() => document.getElementById('view').getAttribute('data-loaded') === 'job', { timeout: WAIT });
  assert(page.url().endsWith('#/job/' + RUN), 'url: ' + page.url());
  await view('#/cluster');
});

await check('the token is kept in sessionStorage and never put in a URL', async () => {
  const stored = await page.evaluate(() => sessionStorage.getItem('corral.token'));
  assert(stored === TOKEN, 'sessionStorage lacks the token');
  assert(!urls.some((u) => u.includes(TOKEN)), 'a request URL carries the token');
  assert(!page.url().includes(TOKEN), 'the page URL carries the token');
});

await check('the queue shows the pending job with its reason', async () => {
  await view('#/queue');
  await page.waitForFunction((id) => [...document.querySelectorAll('tbody tr')].some((r) => r.cells[0].textContent === id &&
    r.cells[3].textContent === 'pending' && r.cells[8].textContent.length > 5), { timeout: WAIT }, PEND);
  const reason = await page.evaluate((id) => [...document.querySelectorAll('tbody tr')].find((r) => r.cells[0].textContent === id).cells[8].textContent, PEND);
  console.log('  pending reason: ' + reason);
  assert(/H100|GPU/.test(reason), 'reason: ' + reason);
  await shot('queue');
});

await check('a job name with markup is shown as text, not run', async () => {
  const names = await page.$$eval('tbody tr td:nth-child(2)', (c) => c.map((x) => x.textContent));
  assert(names.includes('<img src=x id=xss>train'), 'names: ' + names.join('|'));
  assert(!(await page.$('#xss')), 'the name became an element');
});

await check("the job page shows spec, placement, events and a live log line", async () => {
  await view('#/job/' + RUN);
  await page.waitForFunction((m) => (document.getElementById('job-logs') || {}).textContent?.includes(m),
    { timeout: WAIT, polling: 250 }, 'ui-marker-' + RUN);
  assert((await text('#job-state')) === 'running', 'state');
  const body = await text('#view');
  assert(body.includes('h100-0'), 'no placement');
  assert(body.includes('started'), 'no started event');
  await shot('job');
});

await check("another tenant's job is refused", async () => {
  await view('#/job/' + OTHER);
  const t = await text('#job-error');
  assert(/not found/.test(t), 'got: ' + t);
  const body = await text('#view');
  assert(!body.includes('secret-vision'), 'the other job leaked');
  await shot('job-refused');
});

await check('the tenants view shows quota use and fair share', async () => {
  await view('#/tenants');
  const body = await text('#view');
  assert(body.includes('H100 SXM: 2 / 4'), 'quota use: ' + body);
  await shot('tenants');
});

await check('the services view renders', async () => {
  await view('#/services');
  await shot('services');
});

await check('the advisor form shows ranked GPU types', async () => {
  await view('#/advise');
  await page.select('select[name=kind]', 'finetune');
  await page.type('input[name=params]', '7e9');
  await page.select('select[name=method]', 'lora');
  await page.type('input[name=tokens]', '1e8');
  await page.click('#advise-form button');
  await page.waitForFunction(() => document.querySelectorAll('#advise-out tbody tr').length >= 2, { timeout: WAIT });
  const first = await text('#advise-out tbody tr td:nth-child(2)');
  assert(first.length > 0, 'no ranked type');
  await shot('advise');
});

await check('no script errors or CSP violations', async () => {
  assert(problems.length === 0, problems.join('; '));
});

await browser.close();
console.log(passed + ' passed, ' + failed + ' failed');
process.exit(failed ? 1 : 0);
