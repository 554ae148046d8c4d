// browser_test.mjs - drive the system Chromium over the DevTools protocol
// (puppeteer-core; no browser download) through every dashboard view, as a
// user of tenant "ml". Set up by ui_test.sh; environment:
//   UI_URL UI_TOKEN UI_RUN (a running job printing ui-marker-ID)
//   UI_PEND (a job that cannot fit) UI_OTHER (another tenant's job)
//   UI_CANCEL (a pending job of ml the test holds, releases and cancels)
//   UI_ADMIN (an admin token: drain and undrain a node)
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
const CANCEL = env('UI_CANCEL');
const ADMIN = env('UI_ADMIN');
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

// Each chart named has data points (its figure's data-points, and a line
// or dot drawn), a y axis with 5 ticks and a time axis with 6.
async function chartsOk(ids, min) {
  for (const id of ids) {
    const f = await page.$eval('[id="' + id + '"]', (x) => ({ n: Number(x.dataset.points), drawn: x.querySelectorAll('path.line, circle').length,
      xt: x.querySelectorAll('text.xtick').length, yt: x.querySelectorAll('text.ytick').length, axes: x.querySelectorAll('line.axis').length }));
    assert(f.n >= (min || 1) && f.drawn >= 1 && f.xt === 6 && f.yt === 5 && f.axes >= 7, id + ': ' + JSON.stringify(f));
  }
}
async function shot(name) {
  await page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
}
async function view(hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForFunction((n) => document.getElementById('view').getAttribute('data-loaded') === n,
    { timeout: WAIT }, hash.replace(/^#\//, '').split('/')[0]);
}
const text = (sel) => page.$eval(sel, (e) => e.textContent);
// Click what sel names once it is there, inside the page in one step: the
// view is redrawn every 2 s, so a handle found first may be gone when
// clicked.
async function press(sel) {
  await page.waitForSelector(sel, { timeout: WAIT });
  await page.waitForFunction((q) => { const e = document.querySelector(q); if (!e) return false; e.click(); return true; }, { timeout: WAIT }, sel);
}

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
  await press('.gpu[data-node="h100-0"][data-job="' + RUN + '"]');
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

await check('the queue redraws on server-sent events, not only by polling', async () => {
  await page.waitForFunction(() => document.body.dataset.live === 'events', { timeout: WAIT });
  const before = await page.evaluate(() => Number(document.getElementById('view').dataset.liveRedraws || 0));
  // a change made elsewhere (the API, as the CLI makes it): held, then released
  const hold = await page.evaluate(async (id, t) => (await fetch('/v1/jobs/' + id + '/hold', { method: 'POST', headers: { Authorization: 'Bearer ' + t } })).status, PEND, TOKEN);
  assert(hold === 200, 'hold: ' + hold);
  await page.waitForFunction((id, n) => Number(document.getElementById('view').dataset.liveRedraws || 0) > n &&
    [...document.querySelectorAll('tbody tr')].some((r) => r.cells[0].textContent === id && r.cells[3].textContent === 'held'),
  { timeout: WAIT, polling: 100 }, PEND, before);
  const rel = await page.evaluate(async (id, t) => (await fetch('/v1/jobs/' + id + '/release', { method: 'POST', headers: { Authorization: 'Bearer ' + t } })).status, PEND, TOKEN);
  assert(rel === 200, 'release: ' + rel);
  await page.waitForFunction((id) => [...document.querySelectorAll('tbody tr')].some((r) => r.cells[0].textContent === id && r.cells[3].textContent === 'pending'),
    { timeout: WAIT, polling: 100 }, PEND);
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
  const uuids = await page.evaluate(() => [...document.querySelectorAll('#view table')].find((t) => t.textContent.includes('UUIDs'))
    .querySelector('tbody tr td:nth-child(3)').textContent);
  assert(/^GPU-\S+ GPU-\S+$/.test(uuids), 'placement UUIDs: ' + uuids);
  assert(body.includes('started'), 'no started event');
  // the advisor's plan and its reasons (the start's own text)
  const plan = await page.evaluate(async (id, t) => (await (await fetch('/v1/jobs/' + id, { headers: { Authorization: 'Bearer ' + t } })).json()).plan, RUN, TOKEN);
  assert(plan && plan.text && plan.tp >= 1, 'the API has no plan for the LoRA job: ' + JSON.stringify(plan));
  const adv = await text('#job-advisor');
  assert(adv.includes(plan.text) && adv.includes('micro ' + plan.micro_batch), 'advisor part: ' + adv);
  assert(/2 x H100 SXM on h100-0\[/.test(adv) && adv.includes('plan ' + plan.text), 'the reasons: ' + adv);
  await shot('job');
});


await check('the history view plots the jobs: points, axes, tenant ml only', async () => {
  await view('#/history');
  // the last 15 minutes: one point per 4 s step; the page redraws every 2 s
  await press('button[data-span="900"]');
  await page.waitForFunction(() => {
    const l = document.querySelector('#plot-alloc path.line[data-series="allocated"]');
    return l && (l.getAttribute('d').match(/[ML]/g) || []).length >= 3 &&
      /allocated: 2 GPUs/.test(document.querySelector('#plot-alloc .plot-legend').textContent);
  }, { timeout: WAIT, polling: 250 });
  const p = await page.$eval('#plot-alloc', (f) => ({
    paths: [...f.querySelectorAll('path.line')].map((x) => ({ s: x.dataset.series, n: (x.getAttribute('d').match(/[ML]/g) || []).length })),
    xt: f.querySelectorAll('text.xtick').length, yt: [...f.querySelectorAll('text.ytick')].map((t) => t.textContent),
  }));
  const alloc = p.paths.find((x) => x.s === 'allocated');
  assert(alloc && alloc.n >= 3, 'allocated line: ' + JSON.stringify(p.paths));
  assert(p.xt >= 5 && p.yt.length >= 5, 'axes: ' + JSON.stringify(p));
  const tenants = await page.$$eval('#plot-tenant-alloc path.line, #plot-tenant-alloc circle', (x) => x.map((e) => e.dataset.series));
  assert(tenants.includes('ml'), 'tenant plot: ' + tenants.join(','));
  const body = await text('#view');
  assert(!body.includes('vision'), "another tenant's series is shown");
  assert(!(await page.$('#plot-nodes')), 'a user sees the per-node plot (admin only)');
  for (const id of ['plot-util', 'plot-queue', 'plot-wait']) assert(await page.$('#' + id + ' svg'), 'no ' + id);
  // the two jobs that started: a dot each for their wait, all and ml's
  const dots = await page.$$eval('#plot-start-wait circle.dot', (x) => x.map((e) => e.dataset.series));
  assert(dots.includes('all') && dots.includes('ml') && !dots.includes('vision'), 'start waits: ' + dots.join(','));
  await shot('history');
  // the synthetic day ui_test.sh imported: every chart has a day of points
  await press('button[data-span="86400"]');
  await page.waitForFunction(() => ['plot-util', 'plot-alloc', 'plot-tenant-alloc', 'plot-tenant-util', 'plot-queue', 'plot-wait']
    .every((id) => Number((document.getElementById(id) || { dataset: {} }).dataset.points) >= 200), { timeout: WAIT, polling: 250 });
  await chartsOk(['plot-util', 'plot-alloc', 'plot-tenant-alloc', 'plot-tenant-util', 'plot-queue', 'plot-wait'], 200);
  await chartsOk(['plot-start-wait'], 20);
  const day = await page.$$eval('#plot-tenant-alloc path.line', (x) => x.map((e) => e.dataset.series));
  assert(day.length === 1 && day[0] === 'ml', 'tenant lines over the day: ' + day.join(','));
  assert(!(await text('#view')).includes('vision'), "another tenant's imported series is shown");
  await shot('history-day');
});

await check('a pending job is held, released and cancelled from its page', async () => {
  await view('#/job/' + CANCEL);
  const logs = await text('#job-logs');
  assert(/no output yet/.test(logs), 'logs box: ' + logs);
  assert(!/\bnull\b|undefined/.test(await text('#view')), 'the page shows null: ' + await text('#view'));
  const spec = await text('#job-spec');
  assert(spec.includes('command') && spec.includes('true') && spec.includes('64 x H100 SXM'), 'spec: ' + spec);
  assert(!(await page.$eval('#job-json', (d) => d.open)), 'the full JSON is open');
  const act = async (what, state) => {
    await press('#act-' + what);
    await page.waitForSelector('#confirm-yes', { timeout: WAIT });
    if (what === 'cancel') await shot('job-confirm');
    await press('#confirm-yes');
    await page.waitForFunction((s) => (document.getElementById('job-state') || {}).textContent === s, { timeout: WAIT, polling: 250 }, state);
    const msg = await text('#action-msg');
    assert(msg.endsWith(': done'), what + ': ' + msg);
  };
  await act('hold', 'held');
  await act('release', 'pending');
  // "No" leaves the job as it is
  await press('#act-cancel');
  await press('#confirm-no');
  assert((await text('#job-state')) === 'pending', 'No cancelled it');
  await act('cancel', 'cancelled');
  const st = await page.evaluate(async (id, t) => (await (await fetch('/v1/jobs/' + id, { headers: { Authorization: 'Bearer ' + t } })).json()).state, CANCEL, TOKEN);
  assert(st === 'cancelled', 'the API says ' + st);
  await shot('job-cancelled');
});

await check("a refused action shows the API's error text", async () => {
  // a user token asks for a drain, as a hand-made request would
  const msg = await page.evaluate(async (t) => {
    const r = await fetch('/v1/nodes/h100-0/drain', { method: 'POST', headers: { Authorization: 'Bearer ' + t, 'Content-Type': 'application/json' }, body: '{}' });
    return r.status + ' ' + ((await r.json()).message || '');
  }, TOKEN);
  assert(/^403 /.test(msg), 'a user drained a node: ' + msg);
  // the page shows what the API says: cancel the cancelled job through the page's own path
  await view('#/job/' + CANCEL);
  assert(!(await page.$('#act-cancel')), 'a cancelled job offers cancel');
  await page.evaluate((id) => ask('Cancel job ' + id, '/v1/jobs/' + id + '/cancel'), CANCEL);
  await press('#confirm-yes');
  await page.waitForSelector('#action-msg.error', { timeout: WAIT });
  const t = await text('#action-msg');
  assert(t.startsWith('Cancel job ' + CANCEL + ': ') && t.length > ('Cancel job ' + CANCEL + ': ').length + 3 && !/HTTP/.test(t), 'message: ' + t);
  console.log('  refused: ' + t);
});

await check("another tenant's job is refused", async () => {
  await view('#/job/' + OTHER);
  const t = await text('#job-error');
  assert(/not found/.test(t), 'got: ' + t);
  const body = await text('#view');
  assert(!body.includes('secret-vision'), 'the other job leaked');
  await shot('job-refused');
});

await check("a user's node page shows no GPU history", async () => {
  await view('#/cluster');
  assert(!(await page.$('a.node-link')), 'a user gets node links');
  await view('#/node/h100-0');
  const t = await text('#node-error');
  assert(/admin/.test(t), 'node page: ' + t);
  assert(!(await page.$('#view svg')), 'a user sees a node chart');
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
  await press('#advise-form button');
  await page.waitForFunction(() => document.querySelectorAll('#advise-out tbody tr').length >= 2, { timeout: WAIT });
  const first = await text('#advise-out tbody tr td:nth-child(2)');
  assert(first.length > 0, 'no ranked type');
  await shot('advise');
});


// submit as ml from the page (the API the CLI uses), its id
async function submit(spec) {
  return page.evaluate(async (t, b) => {
    const r = await fetch('/v1/jobs', { method: 'POST', headers: { Authorization: 'Bearer ' + t, 'Content-Type': 'application/json' }, body: JSON.stringify(b) });
    const v = await r.json();
    if (r.status !== 201 || !v.ids) throw new Error('submit: ' + r.status + ' ' + JSON.stringify(v));
    return String(v.ids[0]);
  }, TOKEN, spec);
}
const apiJob = (id) => page.evaluate(async (i, t) => (await fetch('/v1/jobs/' + i, { headers: { Authorization: 'Bearer ' + t } })).json(), id, TOKEN);
async function until(what, fn, ms) {
  const end = Date.now() + (ms || 60000);
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 250));
  }
}
async function act(what, label) {
  await press('#act-' + what);
  await page.waitForSelector('#confirm-yes', { timeout: WAIT });
  await press('#confirm-yes');
  await page.waitForSelector('#action-msg', { timeout: WAIT });
  const msg = await text('#action-msg');
  assert(msg === label + ': done', what + ': ' + msg);
}

await check('an auto job no type can run: the advisor part gives each refusal', async () => {
  const id = await submit({ name: 'chat-405b', command: ['true'], gpus: 2, gpu_type: 'auto', kind: 'inference', model: { params: 405e9 } });
  await view('#/job/' + id);
  await page.waitForFunction(() => /no GPU type/.test((document.getElementById('job-advisor') || {}).textContent || ''), { timeout: WAIT, polling: 250 });
  const adv = await text('#job-advisor');
  console.log('  refusal: ' + adv.slice(0, 240));
  assert(/on the 2 GPUs asked/.test(adv), 'the refusal does not say the job asked for 2 GPUs: ' + adv);
  await shot('job-advisor-refused');
  await act('cancel', 'Cancel job ' + id);
});

await check('a finished job is requeued from its page, a running one stopped and started again', async () => {
  // the cancelled job: Requeue puts it back in the queue (then cancelled again)
  await view('#/job/' + CANCEL);
  await act('requeue', 'Requeue job ' + CANCEL);
  await page.waitForFunction(() => (document.getElementById('job-state') || {}).textContent === 'pending', { timeout: WAIT, polling: 250 });
  assert((await apiJob(CANCEL)).state === 'pending', 'the API does not say pending');
  await act('cancel', 'Cancel job ' + CANCEL);
  await until('job ' + CANCEL + ' cancelled', async () => (await apiJob(CANCEL)).state === 'cancelled');
  // a running job: stopped, pending, started again (a second start event)
  const id = await submit({ name: 'to-requeue', command: ['sleep', '300'], gpus: 1, gpu_type: 'H100 SXM' });
  await until('job ' + id + ' running', async () => (await apiJob(id)).state === 'running');
  await view('#/job/' + id);
  await page.waitForFunction(() => (document.getElementById('job-state') || {}).textContent === 'running', { timeout: WAIT, polling: 250 });
  await act('requeue', 'Requeue job ' + id);
  const j = await until('job ' + id + ' to start again', async () => {
    const v = await apiJob(id);
    return v.state === 'running' && (v.events || []).filter((e) => e.what === 'started').length === 2 ? v : null;
  });
  const seen = j.events.map((e) => e.what);
  assert(seen.includes('requeue-requested'), 'events: ' + seen.join(','));
  await page.waitForFunction(() => [...document.querySelectorAll('#view table td')].filter((c) => c.textContent === 'requeue-requested').length === 1,
    { timeout: WAIT, polling: 250 });
  await shot('job-requeued');
  await act('cancel', 'Cancel job ' + id);
  await until('job ' + id + ' cancelled', async () => (await apiJob(id)).state === 'cancelled');
});

await check("a service's replicas against its load, ml's own only", async () => {
  const mk = await page.evaluate(async (t) => {
    const r = await fetch('/v1/services', { method: 'POST', headers: { Authorization: 'Bearer ' + t, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'chat', command: ['sleep', '300'], gpus: 1, gpu_type: 'H100 SXM', min_replicas: 1, max_replicas: 1 }) });
    return r.status + ' ' + (await r.text());
  }, TOKEN);
  assert(/^20[01] /.test(mk), 'create: ' + mk);
  // a gateway's load report (an admin token, as a gateway has)
  const rep = await page.evaluate(async (t) => (await fetch('/v1/services/chat@ml/metrics', { method: 'POST',
    headers: { Authorization: 'Bearer ' + t, 'Content-Type': 'application/json' }, body: '{"in_flight":3,"rps":12.5,"p95_ms":120}' })).status, ADMIN);
  assert(rep === 200 || rep === 204, 'load report: ' + rep);
  await view('#/services');
  await press('button[data-span="900"]');
  await page.waitForFunction(() => {
    const rp = document.getElementById('plot-svc-replicas-chat@ml'), ld = document.getElementById('plot-svc-load-chat@ml');
    const n = (f, s) => ((f && f.querySelector('path.line[data-series="' + s + '"]')) ? f.querySelector('path.line[data-series="' + s + '"]').getAttribute('d').match(/[ML]/g).length : 0);
    return n(rp, 'wanted') >= 3 && n(ld, 'requests/s') >= 3;
  }, { timeout: WAIT, polling: 250 });
  const legend = await text('#view');
  assert(/wanted: 1(?![0-9.])/.test(legend) && /requests\/s: 12\.5/.test(legend), 'legends: ' + legend);
  await chartsOk(['plot-svc-replicas-chat@ml', 'plot-svc-load-chat@ml'], 3);
  // the API gives ml its own service's series and none of another tenant's
  const names = await page.evaluate(async (t) => (await (await fetch('/v1/history?series=service.*', { headers: { Authorization: 'Bearer ' + t } })).json()).series.map((x) => x.name), TOKEN);
  assert(names.length >= 3 && names.every((n) => n.startsWith('service.chat@ml.')), 'service series: ' + names.join(','));
  await shot('services-plots');
  const del = await page.evaluate(async (t) => (await fetch('/v1/services/chat', { method: 'DELETE', headers: { Authorization: 'Bearer ' + t } })).status, TOKEN);
  assert(del >= 200 && del < 300, 'delete: ' + del);
});

await check('an admin drains and undrains a node from the cluster map', async () => {
  await press('#logout');
  await page.waitForSelector('#token', { visible: true, timeout: WAIT });
  await page.type('#token', ADMIN);
  await press('#login-form button');
  await page.waitForSelector('#nav:not([hidden])', { timeout: WAIT });
  await view('#/cluster');
  const state = (n) => page.$eval('.node[data-node="' + n + '"] .node-name', (e) => e.textContent);
  await press('.node-act[data-node="a30-0"][data-act="drain"]');
  await press('#confirm-yes');
  await page.waitForSelector('.node-act[data-node="a30-0"][data-act="undrain"]', { timeout: WAIT });
  assert(/drained/.test(await state('a30-0')), 'a30-0: ' + await state('a30-0'));
  await shot('cluster-drained');
  await press('.node-act[data-node="a30-0"][data-act="undrain"]');
  await press('#confirm-yes');
  await page.waitForSelector('.node-act[data-node="a30-0"][data-act="drain"]', { timeout: WAIT });
  assert(/\(up/.test(await state('a30-0')), 'a30-0: ' + await state('a30-0'));
  await view('#/history');
  await page.waitForSelector('#plot-nodes path.line', { timeout: WAIT });
  await shot('history-admin');
  // a node's GPUs over time: the map's node name opens it; a line per GPU in each chart
  await view('#/cluster');
  await press('a.node-link[href="#/node/h100-0"]');
  await page.waitForFunction(() => document.getElementById('view').getAttribute('data-loaded') === 'node', { timeout: WAIT });
  await press('button[data-span="900"]');
  await page.waitForFunction(() => ['plot-node-util', 'plot-node-mem', 'plot-node-power', 'plot-node-temp']
    .every((id) => document.querySelectorAll('#' + id + ' path.line').length === 4), { timeout: WAIT, polling: 250 });
  await chartsOk(['plot-node-util', 'plot-node-mem', 'plot-node-power', 'plot-node-temp'], 8);
  for (const id of ['plot-node-util', 'plot-node-mem', 'plot-node-power', 'plot-node-temp']) {
    const sers = await page.$eval('#' + id, (x) => [...x.querySelectorAll('path.line')].map((l) => l.dataset.series));
    assert(sers.join(',') === 'GPU 0,GPU 1,GPU 2,GPU 3', id + ' lines: ' + sers.join(','));
  }
  // the imported day: GPU series keep 2,016 coarse slots of 30 steps (at
  // this test's 1 s step, the last 16.8 h): 160+ points a GPU in every chart
  await press('button[data-span="86400"]');
  await page.waitForFunction(() => ['plot-node-util', 'plot-node-mem', 'plot-node-power', 'plot-node-temp']
    .every((id) => Number((document.getElementById(id) || { dataset: {} }).dataset.points) >= 4 * 150), { timeout: WAIT, polling: 250 });
  await shot('node-admin');
  // the running job's GPUs over its life, beside its events
  await view('#/job/' + RUN);
  await page.waitForFunction(() => Number((document.getElementById('plot-job-util') || { dataset: {} }).dataset.points) >= 2,
    { timeout: WAIT, polling: 250 });
  await page.waitForFunction(() => ['plot-job-util', 'plot-job-mem', 'plot-job-power']
    .every((id) => Number((document.getElementById(id) || { dataset: {} }).dataset.points) >= 2), { timeout: WAIT, polling: 250 });
  await chartsOk(['plot-job-util', 'plot-job-mem', 'plot-job-power'], 2);
  const lines = await page.$$eval('#plot-job-util path.line', (x) => x.map((e) => e.dataset.series));
  assert(lines.length === 2 && lines.every((l) => l.startsWith('h100-0.')), 'job GPU lines: ' + lines.join(','));
  await shot('job-admin');
  // the charts alone, their box read in the page (a handle could be redrawn away)
  const clip = await page.$eval('#view .plots', (e) => {
    const r = e.getBoundingClientRect();
    return { x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height };
  });
  await page.screenshot({ path: path.join(SHOTS, 'job-gpus.png'), clip });
});

await check('no script errors or CSP violations', async () => {
  assert(problems.length === 0, problems.join('; '));
});

await browser.close();
console.log(passed + ' passed, ' + failed + ' failed');
process.exit(failed ? 1 : 0);
