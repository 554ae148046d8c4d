// Corral dashboard: one page, hash routes, data from the v1 API with the
// user's own token (sessionStorage, sent as an Authorization header; never
// in a URL). Every value is rendered with textContent: no HTML from data.
'use strict';

const POLL_MS = 2000;
// With the event stream up, views other than the job page (its logs come
// from the agent) redraw on events and poll only for utilisation and such.
const LIVE_POLL_MS = 10000;
const KEY = 'corral.token';
let timer = null;
let me = { role: '' }; // the logged-in token's /v1/whoami
let viewGen = 0; // bumps on every navigation: late answers of an old view are dropped

function token() { return sessionStorage.getItem(KEY) || ''; }

async function api(path, opts) {
  const o = Object.assign({ headers: {} }, opts || {});
  o.headers.Authorization = 'Bearer ' + token();
  o.cache = 'no-store';
  if (o.body !== undefined) { o.headers['Content-Type'] = 'application/json'; }
  const r = await fetch(path, o);
  if (r.status === 401) { logout('the token was refused'); throw new Error('unauthenticated'); }
  return r;
}

async function getJSON(path) {
  const r = await api(path);
  const v = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = new Error(v.message || ('HTTP ' + r.status));
    e.status = r.status;
    throw e;
  }
  return v;
}

// el('div', {class: 'x'}, child, 'text', ...): text children become text nodes.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'class') e.className = v;
    else if (k === 'onclick' || k === 'onsubmit' || k === 'onchange' || k === 'oninput') e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const k of kids) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function table(head, rows) {
  return el('table', {}, el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...rows.map((r) => el('tr', {}, ...r.map((c) => el('td', {}, c))))));
}

// The view's new children; null ones (an absent part) are left out.
function show(v, ...kids) { v.replaceChildren(...kids.filter((k) => k !== null && k !== undefined && k !== false)); }

function jobLink(id) { return el('a', { href: '#/job/' + encodeURIComponent(id) }, String(id)); }
function fmt(x, d) { return typeof x === 'number' ? x.toFixed(d === undefined ? 1 : d) : (x === null || x === undefined ? '' : String(x)); }
function status(t) { document.getElementById('status').textContent = t; }

function logout(why) {
  sessionStorage.removeItem(KEY);
  showLogin(why || '');
}

// ---------------------------------------------------------------- live

// GET /v1/events: the controller's changes as server-sent events. Read
// with fetch and a body reader, not EventSource, which cannot send the
// Authorization header (the token is never put in a URL). A view redraws
// on an event that concerns it (150 ms after the last of a burst); when the
// stream is down the views poll every 2 s as before, and it is tried again
// after 3 s. body[data-live] says which ("events" or "poll"); the counts
// in data-live-events and the view's data-live-redraws are for tests.
const live = { ctrl: null, events: 0, redraws: 0, timer: null, lastRender: 0 };

function liveOn() { return document.body.dataset.live === 'events'; }

function liveStart() {
  if (live.ctrl) return;
  const ctrl = new AbortController();
  live.ctrl = ctrl;
  (async () => {
    try {
      const r = await fetch('/v1/events', { headers: { Authorization: 'Bearer ' + token() }, cache: 'no-store', signal: ctrl.signal });
      if (!r.ok || !r.body) throw new Error('HTTP ' + r.status);
      document.body.dataset.live = 'events';
      const rd = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await rd.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        for (let i; (i = buf.indexOf('\n\n')) >= 0;) {
          liveEvent(buf.slice(0, i));
          buf = buf.slice(i + 2);
        }
        if (buf.length > 65536) buf = ''; // not the controller's: no event is that long
      }
    } catch (e) { /* refused, aborted or cut: poll meanwhile */ }
    if (live.ctrl !== ctrl) return; // stopped (log out)
    live.ctrl = null;
    document.body.dataset.live = 'poll';
    if (token()) setTimeout(liveStart, 3000);
  })();
}

function liveStop() {
  const c = live.ctrl;
  live.ctrl = null;
  if (c) c.abort();
  document.body.dataset.live = 'off';
}

function liveEvent(block) {
  let kind = '', data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('event: ')) kind = line.slice(7);
    else if (line.startsWith('data: ')) data += line.slice(6);
  }
  if (!kind) return; // a comment (the keep-alive ping)
  live.events++;
  document.body.dataset.liveEvents = String(live.events);
  let d = {};
  try { d = JSON.parse(data); } catch (e) { /* keep d empty */ }
  const c = current();
  const ours = c.name === 'cluster' || c.name === 'queue' || c.name === 'tenants' || c.name === 'services' ||
    (c.name === 'job' && ((kind === 'job' && String(d.id) === c.arg) ||
      (kind === 'jobs' && Number(c.arg) >= d.first && Number(c.arg) < d.first + d.count)));
  if (!ours) return;
  clearTimeout(live.timer);
  live.timer = setTimeout(() => {
    live.redraws++;
    document.getElementById('view').dataset.liveRedraws = String(live.redraws);
    refresh(true);
  }, 150);
}

function showLogin(msg) {
  clearInterval(timer);
  liveStop();
  document.getElementById('login').hidden = false;
  document.getElementById('view').hidden = true;
  document.getElementById('nav').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('who').textContent = '';
  document.getElementById('login-error').textContent = msg;
}

async function login(t) {
  sessionStorage.setItem(KEY, t);
  try {
    me = await getJSON('/v1/whoami');
    document.getElementById('who').textContent = me.role + (me.role === 'user' ? ' ' + me.name + ' (tenant ' + me.tenant + ')' : ' ' + me.name);
    document.getElementById('login').hidden = true;
    document.getElementById('view').hidden = false;
    document.getElementById('nav').hidden = false;
    document.getElementById('logout').hidden = false;
    liveStart();
    route();
  } catch (e) {
    if (e.message !== 'unauthenticated') showLogin(e.message);
  }
}


// ---------------------------------------------------------------- plots

// Plain SVG line charts drawn here (no library, no CDN). Okabe-Ito colours:
// told apart with the common colour-vision deficiencies.
const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#000000', '#F0E442'];
const SVGNS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

// A y-axis top that reads well: 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function fmtTick(v) {
  if (v >= 1e9) return (v / 1e9).toFixed(v % 1e9 ? 1 : 0) + 'G';
  if (v >= 1e6) return (v / 1e6).toFixed(v % 1e6 ? 1 : 0) + 'M';
  if (v >= 1e3) return (v / 1e3).toFixed(v % 1e3 ? 1 : 0) + 'k';
  return String(Math.round(v * 100) / 100);
}

function fmtTime(t, span) {
  const d = new Date(t * 1000);
  const p2 = (n) => String(n).padStart(2, '0');
  const hm = p2(d.getHours()) + ':' + p2(d.getMinutes());
  return span > 2 * 86400 ? (d.getMonth() + 1) + '-' + p2(d.getDate()) : (span < 600 ? hm + ':' + p2(d.getSeconds()) : hm);
}

// lines: [{label, points: [[unix_s, value], ...]}]; r: {from, to, step}.
// A gap of more than two steps breaks a line. The figure's data-points
// counts the points drawn (tests read it).
function plot(id, title, unit, lines, r) {
  const W = 560, H = 190, L = 46, R = 8, T = 8, B = 24;
  let ymax = 0, npts = 0;
  for (const l of lines) for (const p of l.points) { if (p[1] > ymax) ymax = p[1]; npts++; }
  ymax = unit === '%' ? 100 : niceMax(ymax);
  const span = Math.max(1, r.to - r.from);
  const X = (t) => L + (W - L - R) * (t - r.from) / span;
  const Y = (v) => T + (H - T - B) * (1 - v / ymax);
  const g = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, role: 'img', 'aria-label': title });
  const axes = svg('g', { class: 'axes' });
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4, y = Y(v);
    axes.append(svg('line', { x1: L, x2: W - R, y1: y, y2: y, class: i ? 'grid' : 'axis' }),
      svg('text', { x: L - 4, y: y + 4, 'text-anchor': 'end', class: 'ytick' }, fmtTick(v) + (i === 4 && unit ? ' ' + unit : '')));
  }
  for (let i = 0; i <= 5; i++) {
    const t = r.from + span * i / 5, x = X(t);
    axes.append(svg('line', { x1: x, x2: x, y1: H - B, y2: H - B + 4, class: 'axis' }),
      svg('text', { x, y: H - 6, 'text-anchor': i === 0 ? 'start' : i === 5 ? 'end' : 'middle', class: 'xtick' }, fmtTime(t, span)));
  }
  axes.append(svg('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis' }));
  g.append(axes);
  lines.forEach((l, i) => {
    const colour = PALETTE[i % PALETTE.length];
    let d = '', prev = null;
    for (const p of l.points) {
      d += (prev === null || p[0] - prev > 2 * r.step ? 'M' : 'L') + X(p[0]).toFixed(1) + ' ' + Y(p[1]).toFixed(1);
      prev = p[0];
    }
    if (l.dots) { // a value now and then (jobs that started): each point a dot
      for (const p of l.points) g.append(svg('circle', { cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 2.2, fill: colour, 'data-series': l.label, class: 'dot' }));
    } else if (l.points.length === 1) {
      g.append(svg('circle', { cx: X(l.points[0][0]), cy: Y(l.points[0][1]), r: 2.5, fill: colour, 'data-series': l.label }));
    } else if (d) {
      g.append(svg('path', { d, fill: 'none', stroke: colour, 'stroke-width': 1.6, 'data-series': l.label, class: 'line' },
        svg('title', {}, l.label)));
    }
  });
  const legend = el('div', { class: 'plot-legend' }, ...lines.map((l, i) => {
    const last = l.points.length ? l.points[l.points.length - 1][1] : null;
    return el('span', {}, el('i', { 'data-c': i % PALETTE.length }), l.label + (last === null ? ' (no data)' : ': ' + fmtTick(last) + (unit ? ' ' + unit : '')));
  }));
  const fig = el('figure', { class: 'plot', id, 'data-points': npts }, el('figcaption', {}, title), g, legend);
  if (!npts) fig.append(el('p', { class: 'nodata' }, 'no data in this range yet'));
  return fig;
}

const histRange = { span: 3600 };
const SPANS = [['15 min', 900], ['1 h', 3600], ['6 h', 6 * 3600], ['1 day', 86400], ['7 days', 7 * 86400], ['90 days', 90 * 86400]];

async function viewHistory(v) {
  // #/history/SECONDS: a range to link to (15 min .. 90 days)
  urlSpan(current().arg);
  const to = Math.floor(Date.now() / 1000), from = to - histRange.span;
  const q = (series, extra) => getJSON('/v1/history?' + new URLSearchParams(Object.assign({ series, from: String(from), to: String(to) }, extra)).toString());
  // nodes: the busiest dozen only (the API ranks them): a thousand lines read as none
  const [d, nd] = await Promise.all([q('cluster.*,queue.*,tenant.*'), me.role === 'admin' ? q('node.*', { top: '12' }) : null]);
  const by = new Map(d.series.map((s) => [s.name, s.points]));
  const one = (name, label) => ({ label: label || name, points: by.get(name) || [] });
  const group = (re, list) => (list || d.series).map((s) => [s.name.match(re), s]).filter(([m]) => m).map(([m, s]) => ({ label: m[1], points: s.points }));
  const nodes = nd ? group(/^node\.(.+)\.gpu_util$/, nd.series) : [];
  const nodeNote = nodes.length === 12 ? ' (the 12 busiest)' : '';
  const r = { from: d.from, to, step: d.step };
  const spans = el('div', { class: 'filters' }, 'range ', ...SPANS.map(([label, s]) => el('button', {
    type: 'button', class: s === histRange.span ? 'active' : '', 'data-span': s,
    onclick: () => { histRange.span = s; location.hash = '#/history/' + s; },
  }, label)), el('span', {}, 'step ' + d.step + ' s'));
  const plots = [
    plot('plot-util', 'Cluster GPU utilisation', '%', [one('cluster.gpu_util', 'all GPUs')], r),
    plot('plot-alloc', 'GPUs allocated', 'GPUs', [one('cluster.gpus_allocated', 'allocated'), one('cluster.gpus_total', 'registered')], r),
    plot('plot-tenant-alloc', 'GPUs allocated per tenant', 'GPUs', group(/^tenant\.(.+)\.gpus_allocated$/), r),
    plot('plot-tenant-util', 'Utilisation of each tenant\'s GPUs', '%', group(/^tenant\.(.+)\.gpu_util$/), r),
    plot('plot-queue', 'Queue length', 'jobs', [one('queue.pending', 'pending'), one('queue.running', 'running')], r),
    plot('plot-wait', 'Wait of pending jobs so far', 's', [one('queue.wait_p50_s', 'median'), one('queue.wait_p90_s', '90th percentile'),
      one('queue.wait_max_s', 'longest'), one('queue.wait_s', 'mean')], r),
    plot('plot-start-wait', 'Wait of jobs that started (submit to start)', 's',
      [Object.assign(one('queue.start_wait_s', 'all'), { dots: true }), ...group(/^tenant\.(.+)\.start_wait_s$/).map((l) => Object.assign(l, { dots: true }))], r),
  ];
  if (nodes.length) plots.push(plot('plot-nodes', 'GPU utilisation per node' + nodeNote, '%', nodes, r));
  v.replaceChildren(el('h1', {}, 'History'), spans, el('div', { class: 'plots' }, ...plots));
}

// A node's GPUs over time (#/node/NAME), an admin's: utilisation, memory,
// power and temperature of each GPU from the history's per-GPU series
// (gpu.NODE.INDEX.*); a user reads no node or GPU series (they show other
// tenants' work), so the page says so instead.
async function viewNode(v, name) {
  const head = el('h1', {}, 'Node ' + name);
  if (me.role !== 'admin') {
    v.replaceChildren(head, el('p', { class: 'error', id: 'node-error' }, "a node's GPU history is an admin's (it shows every tenant's work)"));
    return;
  }
  urlSpan(current().arg2);
  const to = Math.floor(Date.now() / 1000), from = to - histRange.span;
  const d = await getJSON('/v1/history?' + new URLSearchParams({ series: 'gpu.' + name + '.*', from: String(from), to: String(to) }).toString());
  const r = { from: d.from, to, step: d.step };
  const pre = 'gpu.' + name + '.';
  const of = (suffix) => d.series.filter((s) => s.name.startsWith(pre) && s.name.endsWith(suffix))
    .map((s) => ({ label: 'GPU ' + s.name.slice(pre.length, -suffix.length), points: s.points, i: Number(s.name.slice(pre.length, -suffix.length)) }))
    .filter((l) => Number.isInteger(l.i)).sort((a, b) => a.i - b.i);
  const spans = el('div', { class: 'filters' }, 'range ', ...SPANS.map(([label, s]) => el('button', {
    type: 'button', class: s === histRange.span ? 'active' : '', 'data-span': s,
    onclick: () => { histRange.span = s; location.hash = '#/node/' + encodeURIComponent(name) + '/' + s; },
  }, label)), el('span', {}, 'step ' + d.step + ' s'));
  v.replaceChildren(head, spans, el('div', { class: 'plots' },
    plot('plot-node-util', 'GPU utilisation', '%', of('.util'), r),
    plot('plot-node-mem', 'GPU memory used', 'B', of('.mem_bytes'), r),
    plot('plot-node-power', 'GPU power', 'W', of('.power_w'), r),
    plot('plot-node-temp', 'GPU temperature', 'C', of('.temp_c'), r)));
}

// ---------------------------------------------------------------- actions

// An action asks first (a bar above the view, kept across the 2 s
// refreshes), then goes through the ordinary API with the logged-in token;
// the API's own error text is shown. No cookie carries the token, so a
// page elsewhere cannot make the browser act (no CSRF to guard against).
let pendingAction = null; // {label, path, body}
let actionMsg = null; // {text, error}

function ask(label, path, body) {
  pendingAction = { label, path, body };
  actionMsg = null;
  render(document.getElementById('view'), viewGen);
}

async function confirmAction() {
  const a = pendingAction;
  pendingAction = null;
  if (!a) return;
  try {
    const r = await api(a.path, { method: 'POST', body: a.body === undefined ? undefined : JSON.stringify(a.body) });
    const v = await r.json().catch(() => ({}));
    actionMsg = r.ok ? { text: a.label + ': done', error: false } : { text: a.label + ': ' + (v.message || 'HTTP ' + r.status), error: true };
  } catch (e) {
    if (e.message === 'unauthenticated') return;
    actionMsg = { text: a.label + ': ' + e.message, error: true };
  }
  render(document.getElementById('view'), viewGen);
}

function actionBar() {
  if (pendingAction) {
    return el('div', { class: 'confirm', id: 'confirm' }, pendingAction.label + '?',
      el('button', { type: 'button', id: 'confirm-yes', onclick: confirmAction }, 'Yes, ' + pendingAction.label.split(' ')[0].toLowerCase()),
      el('button', { type: 'button', id: 'confirm-no', onclick: () => { pendingAction = null; render(document.getElementById('view'), viewGen); } }, 'No'));
  }
  if (actionMsg) return el('p', { id: 'action-msg', class: actionMsg.error ? 'error' : 'done' }, actionMsg.text);
  return null;
}

function jobActions(j) {
  const id = encodeURIComponent(j.id);
  const b = (what, label) => el('button', { type: 'button', id: 'act-' + what, onclick: () => ask(label + ' job ' + j.id, '/v1/jobs/' + id + '/' + what) }, label);
  const st = j.state;
  const acts = [];
  if (st === 'pending') acts.push(b('hold', 'Hold'));
  if (st === 'held') acts.push(b('release', 'Release'));
  // the API requeues a running job (stopped, then pending) and a finished one (pending again)
  if (st === 'running' || st === 'completed' || st === 'failed' || st === 'cancelled') acts.push(b('requeue', 'Requeue'));
  if (st === 'pending' || st === 'held' || st === 'running') acts.push(b('cancel', 'Cancel'));
  return acts.length ? el('div', { class: 'actions' }, ...acts) : null;
}

// ---------------------------------------------------------------- views

// One element per GPU (a thousand nodes are 8,000 of them): its lines are
// text (CSS pre-line), and a click on a GPU with a job opens the job page
// (one listener on the view, see route()).
function gpuBox(n, g) {
  const st = g.state;
  const mig = g.mig_total ? 'MIG ' + g.mig_profile + ' ' + g.mig_busy + '/' + g.mig_total : '';
  const lines = ['GPU ' + g.index + ' ' + Math.round(g.util_pct || 0) + '%'];
  if (g.job) lines.push('job ' + g.job);
  if (g.tenant) lines.push(g.tenant);
  if (mig) lines.push('MIG ' + g.mig_busy + '/' + g.mig_total);
  if (st === 'unhealthy') lines.push(g.health);
  const e = document.createElement('div');
  e.className = 'gpu ' + st;
  e.title = n.name + ' GPU ' + g.index + ' ' + g.model + ': ' + st + (g.reason ? ' (' + g.reason + ')' : '') +
    (mig ? ', ' + mig + ' in use' : '') + ', ' + Math.round(g.temp_c || 0) + ' C, ' + Math.round(g.power_w || 0) + ' W';
  e.dataset.state = st;
  e.dataset.node = n.name;
  e.dataset.gpu = g.index;
  if (g.job) e.dataset.job = g.job;
  e.textContent = lines.join('\n');
  return e;
}

// Drain or undrain, for admins (the API refuses a user token anyway).
function nodeAction(n) {
  if (me.role !== 'admin' || n.state === 'lost') return null;
  const what = n.state === 'drained' ? 'undrain' : 'drain';
  const label = (what === 'drain' ? 'Drain' : 'Undrain') + ' node ' + n.name;
  return el('button', { type: 'button', class: 'node-act', 'data-act': what, 'data-node': n.name,
    onclick: () => ask(label, '/v1/nodes/' + encodeURIComponent(n.name) + '/' + what, { reason: what === 'drain' ? 'drained from the dashboard' : '' }) },
  what);
}

async function viewCluster(v) {
  const d = await getJSON('/v1/cluster');
  d.items = d.nodes;
  const byType = new Map();
  for (const n of d.items) {
    const t = (n.gpus[0] && n.gpus[0].model) || '(no GPU)';
    if (!byType.has(t)) byType.set(t, new Map());
    const racks = byType.get(t);
    const r = n.rack || '(no rack)';
    if (!racks.has(r)) racks.set(r, []);
    racks.get(r).push(n);
  }
  const counts = { free: 0, allocated: 0, busy: 0, mig: 0, unhealthy: 0, unavailable: 0 };
  const groups = [];
  for (const [t, racks] of [...byType.entries()].sort()) {
    const rackEls = [];
    let ngpu = 0;
    for (const [r, nodes] of [...racks.entries()].sort()) {
      rackEls.push(el('div', { class: 'rack' }, el('div', { class: 'rack-name' }, 'rack ' + r),
        ...nodes.map((n) => {
          const doms = new Map();
          for (const g of n.gpus) {
            counts[g.state]++;
            ngpu++;
            const k = g.nvlink_domain >= 0 ? 'NVLink ' + g.nvlink_domain : 'PCIe';
            if (!doms.has(k)) doms.set(k, []);
            doms.get(k).push(gpuBox(n, g));
          }
          return el('div', { class: 'node' + (n.state === 'up' ? '' : ' lost'), 'data-node': n.name },
            el('div', { class: 'node-name' }, me.role === 'admin' ? el('a', { href: '#/node/' + encodeURIComponent(n.name), class: 'node-link' }, n.name) : n.name,
              ' (' + n.state + (n.reason ? ': ' + n.reason : '') + ')', nodeAction(n)),
            ...[...doms.entries()].map(([k, gs]) => el('div', { class: 'domain', title: k }, ...gs)));
        })));
    }
    groups.push(el('div', { class: 'group' }, el('h2', {}, t + ' - ' + ngpu + ' GPUs'), ...rackEls));
  }
  show(v, el('h1', {}, 'Cluster'), actionBar(),
    el('p', { class: 'legend' }, ...Object.entries(counts).map(([k, c]) => el('span', { class: k }, k + ' ' + c))),
    el('p', {}, d.items.length + ' nodes'), ...groups);
}

const queueFilter = { state: 'active', tenant: '', text: '' };

async function viewQueue(v) {
  const q = new URLSearchParams({ state: queueFilter.state, limit: '1000' });
  if (queueFilter.tenant) q.set('tenant', queueFilter.tenant);
  const d = await getJSON('/v1/jobs?' + q.toString());
  const text = queueFilter.text.toLowerCase();
  const items = d.items.filter((j) => !text || (j.name || '').toLowerCase().includes(text) || (j.reason || '').toLowerCase().includes(text));
  const sel = el('select', { id: 'f-state', onchange: (e) => { queueFilter.state = e.target.value; refresh(); } },
    ...['active', 'pending', 'running', 'held', 'completed,failed,cancelled'].map((s) => {
      const o = el('option', { value: s }, s);
      if (s === queueFilter.state) o.selected = true;
      return o;
    }));
  const ten = el('input', { id: 'f-tenant', placeholder: 'tenant', value: queueFilter.tenant });
  ten.addEventListener('change', (e) => { queueFilter.tenant = e.target.value; refresh(); });
  const txt = el('input', { id: 'f-text', placeholder: 'name or reason contains', value: queueFilter.text });
  txt.addEventListener('change', (e) => { queueFilter.text = e.target.value; refresh(); });
  v.replaceChildren(el('h1', {}, 'Queue'),
    el('div', { class: 'filters' }, 'state ', sel, ten, txt, el('span', {}, items.length + ' of ' + d.count + ' jobs')),
    table(['id', 'name', 'tenant', 'state', 'gpus', 'type', 'priority', 'submitted', 'reason / placement'],
      items.map((j) => [jobLink(j.id), j.name || '', j.tenant, j.state, j.gpus, j.run_gpu_type || j.gpu_type, j.priority,
        j.submit_time || '', el('span', { class: 'reason' }, j.state === 'running' ? (j.placement || []).map((p) => p.node + ':' + p.gpus.join(',')).join(' ') : (j.reason || ''))])));
}

let logState = { id: null, out: { offset: 0, text: '' }, err: { offset: 0, text: '' } };
let specOpen = false;

async function readLog(id, stream, st) {
  try {
    const r = await api('/v1/jobs/' + encodeURIComponent(id) + '/logs?stream=' + stream + '&offset=' + st.offset);
    if (r.ok) {
      const buf = await r.arrayBuffer();
      st.offset += buf.byteLength;
      st.text += new TextDecoder().decode(buf);
      if (st.text.length > 200000) st.text = st.text.slice(-200000);
    }
  } catch (e) { /* the agent may be gone: the page still shows the rest */ }
}

// The box follows the output (kept at its end) unless the reader scrolled
// up, across the 2 s redraws.
function logBox(id, st, started) {
  if (!st.text) return el('pre', { class: 'logs empty', id }, started ? 'no output yet' : 'no output yet: the job has not started');
  const old = document.getElementById(id);
  const follow = !old || old.scrollTop + old.clientHeight >= old.scrollHeight - 4;
  const top = old ? old.scrollTop : 0;
  const box = el('pre', { class: 'logs', id }, st.text);
  requestAnimationFrame(() => { box.scrollTop = follow ? box.scrollHeight : top; });
  return box;
}

function dur(s) {
  if (typeof s !== 'number' || s <= 0) return '';
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), x = s % 60;
  return (h ? h + ' h ' : '') + (m ? m + ' min ' : '') + (x || (!h && !m) ? x + ' s' : '').trim();
}

function shellWord(w) { return /^[\w@%+=:,./-]+$/.test(w) ? w : "'" + String(w).replace(/'/g, "'\\''") + "'"; }

// The spec as a person reads it: what runs, on what, under which limits;
// members that are absent or at their defaults are left out.
function specSummary(j) {
  const rows = [];
  const add = (k, v) => { if (v !== undefined && v !== null && v !== '' && !(Array.isArray(v) && !v.length)) rows.push([k, v]); };
  add('command', Array.isArray(j.command) ? j.command.map(shellWord).join(' ') : j.command);
  if (j.script) add('script', el('pre', { class: 'script' }, j.script.length > 4000 ? j.script.slice(0, 4000) + '\n...' : j.script));
  let gpus = (j.gpu_milli ? (j.gpu_milli / 1000) + ' of a' : j.gpus) + ' x ' + (j.run_gpu_type || j.gpu_type || 'any GPU');
  if (j.run_gpu_type && j.gpu_type && j.run_gpu_type !== j.gpu_type) gpus += ' (asked ' + j.gpu_type + ')';
  if (j.mig_profile) gpus += ', MIG ' + j.mig_profile;
  if (j.gpu_mem_gb) gpus += ', at least ' + j.gpu_mem_gb + ' GB each';
  add('GPUs', gpus);
  if (j.nodes > 1 || j.tasks_per_node > 1) add('nodes', (j.nodes || 1) + ' node(s)' + (j.tasks_per_node ? ', ' + j.tasks_per_node + ' task(s) per node' : ''));
  add('partition', j.partition);
  add('kind', j.kind);
  if (j.model && typeof j.model === 'object') {
    const m = j.model;
    add('model', [m.name, m.params ? (m.params / 1e9).toFixed(1) + 'B parameters' : '', m.method, m.precision, m.stack, m.tokens ? m.tokens.toExponential(1) + ' tokens' : '']
      .filter(Boolean).join(', '));
  }
  add('priority', j.priority);
  add('time limit', dur(j.time_limit_s));
  add('preemptible', j.preemptible ? 'yes' + (j.checkpoint_interval_s ? ', checkpoint every ' + dur(j.checkpoint_interval_s) : '') : undefined);
  add('retries', j.max_retries ? j.retries + ' of ' + j.max_retries : undefined);
  add('image', j.image || j.image_archive);
  add('mounts', (j.mounts || []).join(' '));
  add('working directory', j.workdir);
  add('environment', (j.env_names || Object.keys(j.env || {})).join(' '));
  add('secrets', (j.secret_names || []).join(' '));
  add('dependency', j.dependency);
  add('array', j.array_index !== undefined ? 'task ' + j.array_index + ' of ' + j.array_first : j.array);
  add('cpus / memory', j.cpus || j.mem_bytes ? (j.cpus || '-') + ' CPUs, ' + (j.mem_bytes ? (j.mem_bytes / 2 ** 30).toFixed(1) + ' GiB' : '-') : undefined);
  add('submitted', j.submit_time);
  add('started', j.start_time);
  add('ended', j.end_time);
  return el('table', { class: 'spec', id: 'job-spec' }, el('tbody', {}, ...rows.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v)))));
}

// What the advisor made of the job: its plan (the parallelism the job's
// environment got: CORRAL_TP, ...) and its reasons, from the latest start
// (the type it got and why, "auto: ... best by cost (advisor: ...)") or,
// while it waits, the reason it gives (an auto job no type can run names
// each type's refusal). Absent for a job the advisor had no part in.
function advisorPart(j) {
  const starts = (j.events || []).filter((e) => e.what === 'started');
  const last = starts.length ? starts[starts.length - 1] : null;
  const parts = last && last.why ? String(last.why).split('; ') : [];
  const p = j.plan;
  const advised = p || j.gpu_type === 'auto' || parts.some((x) => /^auto: /.test(x));
  if (!advised) return null;
  const rows = [];
  if (p) {
    const ways = [['tp', p.tp], ['pp', p.pp], ['dp', p.dp], ['cp', p.cp], ['ep', p.ep]]
      .map(([k, n]) => k + ' ' + n).join(', ');
    rows.push(['plan', p.text + ' (' + (p.kind || 'training') + ')']);
    rows.push(['parallelism', ways]);
    if (p.micro_batch) rows.push(['batch', 'micro ' + p.micro_batch + ', global ' + p.global_batch]);
    if (p.checkpointing) rows.push(['activation checkpointing', p.checkpointing]);
  } else {
    rows.push(['plan', 'none (the model plans training and serving of a known size on a catalog type)']);
  }
  const reasons = parts.length ? parts : (j.state === 'pending' && j.reason ? [j.reason] : []);
  if (reasons.length) rows.push(['reasons', el('ul', { class: 'reasons' }, ...reasons.map((x) => el('li', {}, x)))]);
  return el('div', { id: 'job-advisor' }, el('h2', {}, 'Advisor'),
    el('table', { class: 'spec' }, el('tbody', {}, ...rows.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v))))));
}

// The job's GPUs over its life (the last run), from the history's per-GPU
// series: an admin's only (a GPU's past holds other tenants' jobs too).
async function jobGpuPlots(j) {
  if (me.role !== 'admin' || !(j.placement || []).length) return [];
  const gpus = j.placement.flatMap((p) => (p.gpus || []).map((g) => p.node + '.' + g)).slice(0, 16);
  const from = Math.floor(Date.parse(j.start_time) / 1000);
  const to = j.end_time ? Math.ceil(Date.parse(j.end_time) / 1000) : Math.floor(Date.now() / 1000);
  if (!(from > 0) || to < from) return [];
  const series = gpus.flatMap((g) => ['gpu.' + g + '.util', 'gpu.' + g + '.mem_bytes', 'gpu.' + g + '.power_w']).join(',');
  const d = await getJSON('/v1/history?' + new URLSearchParams({ series, from: String(from), to: String(to) }).toString()).catch(() => null);
  if (!d) return [];
  const r = { from: d.from, to, step: d.step };
  const of = (suffix) => d.series.filter((s) => s.name.endsWith(suffix)).map((s) => ({ label: s.name.slice(4, -suffix.length), points: s.points }));
  return [plot('plot-job-util', "This job's GPUs: utilisation", '%', of('.util'), r),
    plot('plot-job-mem', 'memory used', 'B', of('.mem_bytes'), r),
    plot('plot-job-power', 'power', 'W', of('.power_w'), r)];
}

async function viewJob(v, id) {
  let j;
  try {
    j = await getJSON('/v1/jobs/' + encodeURIComponent(id));
  } catch (e) {
    v.replaceChildren(el('h1', {}, 'Job ' + id), el('p', { class: 'error', id: 'job-error' }, e.status === 404 ? 'job ' + id + ' not found (or not yours)' : e.message));
    return;
  }
  if (logState.id !== id) {
    logState = { id, out: { offset: 0, text: '' }, err: { offset: 0, text: '' } };
    specOpen = false;
  }
  const [, , gpuPlots] = await Promise.all(j.start_time
    ? [readLog(id, 'stdout', logState.out), readLog(id, 'stderr', logState.err), jobGpuPlots(j)] : [null, null, []]);
  const spec = Object.assign({}, j);
  delete spec.events;
  const full = el('details', { id: 'job-json' }, el('summary', {}, 'Full JSON'), el('pre', {}, JSON.stringify(spec, null, 2)));
  full.open = specOpen;
  full.addEventListener('toggle', () => { specOpen = full.open; });
  show(v, el('h1', {}, 'Job ' + j.id + ' ' + (j.name || '')),
    actionBar(), jobActions(j),
    table(['state', 'tenant', 'gpus', 'type', 'reason', 'exit', 'retries'],
      [[el('span', { id: 'job-state' }, j.state), j.tenant, j.gpus, j.run_gpu_type || j.gpu_type, el('span', { id: 'job-reason' }, j.reason || ''), j.exit_code, j.retries]]),
    el('h2', {}, 'Spec'), specSummary(j), full, advisorPart(j),
    el('h2', {}, 'Placement'),
    table(['node', 'GPUs', 'UUIDs'], (j.placement || []).map((p) => [p.node, (p.gpus || []).join(','), (p.gpu_uuids || []).join(' ')])),
    el('h2', {}, 'Events'),
    table(['time', 'what', 'why'], (j.events || []).map((e) => [e.time, e.what, e.why])),
    gpuPlots.length ? el('div', { class: 'plots' }, ...gpuPlots) : null,
    el('div', { class: 'logpair' },
      el('div', {}, el('h2', {}, 'stdout (live)'), logBox('job-logs', logState.out, !!j.start_time)),
      el('div', {}, el('h2', {}, 'stderr'), logBox('job-stderr', logState.err, !!j.start_time))));
}

async function viewTenants(v) {
  const [t, u] = await Promise.all([getJSON('/v1/tenants'), getJSON('/v1/usage?by=tenant').catch(() => ({ items: [] }))]);
  const wsum = t.items.reduce((a, x) => a + (x.weight || 0), 0) || 1;
  const use = new Map(u.items.map((x) => [x.tenant, x]));
  v.replaceChildren(el('h1', {}, 'Tenants'),
    table(['tenant', 'weight', 'fair share', 'GPUs in use / quota', 'GPU-hours', 'energy kWh', 'cost $'],
      t.items.map((x) => {
        const us = x.usage || {};
        const inuse = us.gpus_in_use || {};
        const quotas = x.quotas || {};
        const types = [...new Set([...Object.keys(inuse), ...Object.keys(quotas)])].sort();
        const q = types.map((ty) => el('div', {}, ty + ': ' + (inuse[ty] || 0) + ' / ' + (quotas[ty] === undefined ? 'no quota' : quotas[ty])));
        const uu = use.get(x.name) || {};
        return [x.name, fmt(x.weight, 2), (100 * (x.weight || 0) / wsum).toFixed(0) + '%', el('div', {}, ...q),
          fmt(uu.gpu_hours !== undefined ? uu.gpu_hours : us.gpu_hours, 2), fmt(uu.energy_kwh !== undefined ? uu.energy_kwh : us.energy_kwh, 3),
          fmt(uu.cost !== undefined ? uu.cost : us.cost, 2)];
      })));
}

async function viewServices(v) {
  const d = await getJSON('/v1/services');
  urlSpan(current().arg);
  const to = Math.floor(Date.now() / 1000), from = to - histRange.span;
  // the autoscaler's replicas against the load, from the history
  // (service.NAME@TENANT.*: a user's own tenant's only)
  const [detail, hist] = await Promise.all([
    Promise.all(d.items.map((s) => getJSON('/v1/services/' + encodeURIComponent(s.ref || s.name)).catch(() => s))),
    d.items.length ? getJSON('/v1/history?' + new URLSearchParams({ series: 'service.*', from: String(from), to: String(to) }).toString()).catch(() => null) : null]);
  const by = new Map(((hist && hist.series) || []).map((x) => [x.name, x.points]));
  const r = hist ? { from: hist.from, to, step: hist.step } : null;
  const parts = [el('h1', {}, 'Services')];
  if (r) {
    parts.push(el('div', { class: 'filters' }, 'range ', ...SPANS.map(([label, sp]) => el('button', {
      type: 'button', class: sp === histRange.span ? 'active' : '', 'data-span': sp,
      onclick: () => { histRange.span = sp; location.hash = '#/services/' + sp; },
    }, label)), el('span', {}, 'step ' + hist.step + ' s')));
  }
  parts.push(table(['service', 'tenant', 'replicas (ready/desired)', 'min..max', 'in flight', 'req/s', 'p95 ms'],
    detail.map((s) => [s.name, s.tenant, (s.ready_replicas || 0) + ' / ' + (s.desired_replicas || 0), s.min_replicas + '..' + s.max_replicas,
      fmt(s.load && s.load.in_flight), fmt(s.load && s.load.rps, 2), s.load && s.load.p95_ms >= 0 ? fmt(s.load.p95_ms, 0) : ''])));
  for (const s of detail) {
    parts.push(el('h2', {}, s.name));
    if (r) {
      const k = 'service.' + s.name + '@' + s.tenant + '.';
      const line = (what, label) => ({ label, points: by.get(k + what) || [] });
      parts.push(el('div', { class: 'plots', 'data-service': s.name },
        plot('plot-svc-replicas-' + s.name + '@' + s.tenant, 'Replicas: wanted by the autoscaler, serving', '', [line('replicas', 'wanted'), line('ready', 'serving')], r),
        plot('plot-svc-load-' + s.name + '@' + s.tenant, 'Load the gateways report', '', [line('rps', 'requests/s'), line('in_flight', 'in flight')], r)));
    }
    parts.push(table(['replica job', 'state', 'node', 'port', 'ready', 'draining'],
      (s.replicas || []).map((r) => [jobLink(r.job), r.state, r.node, r.port, r.ready ? 'yes' : 'no', r.draining ? 'yes' : ''])));
    parts.push(el('h3', {}, 'Autoscaler decisions and events'));
    parts.push(table(['time', 'what', 'why'], (s.events || []).slice(-20).reverse().map((e) => [e.time, e.what, e.why])));
  }
  v.replaceChildren(...parts);
}

let adviseResult = null;

function viewAdvise(v) {
  const f = el('form', { class: 'advise', id: 'advise-form' },
    el('label', {}, 'kind ', el('select', { name: 'kind' }, ...['pretrain', 'finetune', 'inference', 'visual', 'hpc', 'batch'].map((k) => el('option', {}, k)))),
    el('label', {}, 'params ', el('input', { name: 'params', placeholder: '7e9', size: 8 })),
    el('label', {}, 'method ', el('select', { name: 'method' }, el('option', { value: '' }, '-'), ...['full', 'lora', 'qlora'].map((k) => el('option', {}, k)))),
    el('label', {}, 'tokens ', el('input', { name: 'tokens', placeholder: '1e8', size: 8 })),
    el('label', {}, 'GPUs ', el('input', { name: 'gpus', placeholder: 'auto', size: 4 })),
    el('label', {}, 'needs ', el('input', { name: 'needs', placeholder: 'fp64,ecc', size: 10 })),
    el('label', {}, 'objective ', el('select', { name: 'objective' }, ...['cost', 'time', 'energy'].map((k) => el('option', {}, k)))),
    el('button', { type: 'submit' }, 'Advise'));
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    const fd = new FormData(f);
    const body = { kind: fd.get('kind'), objective: fd.get('objective'), top: 10 };
    for (const k of ['params', 'tokens', 'gpus']) { if (fd.get(k)) body[k] = Number(fd.get(k)); }
    for (const k of ['method', 'needs']) { if (fd.get(k)) body[k] = fd.get(k); }
    const r = await api('/v1/advise', { method: 'POST', body: JSON.stringify(body) });
    adviseResult = await r.json().catch(() => ({ message: 'HTTP ' + r.status }));
    render(v);
  });
  const out = [];
  if (adviseResult && adviseResult.ranked) {
    out.push(el('h2', {}, 'Ranked by ' + adviseResult.objective));
    out.push(table(['#', 'GPU', 'GPUs', 'plan', 'time h', 'GPU-hours', 'cost $', 'why'],
      adviseResult.ranked.map((x) => [x.rank, x.gpu, x.gpus, x.plan, fmt(x.time_s / 3600, 2), fmt(x.gpu_hours, 1), fmt(x.cost_usd, 2), x.reason])));
    out.push(el('h2', {}, 'Refused'));
    out.push(table(['GPU', 'why'], adviseResult.refused.map((x) => [x.gpu, x.reason])));
  } else if (adviseResult) {
    out.push(el('p', { class: 'error' }, adviseResult.message || 'error'));
  }
  v.replaceChildren(el('h1', {}, 'Advisor'), f, el('div', { id: 'advise-out' }, ...out));
}

// ---------------------------------------------------------------- routing

function current() {
  const h = location.hash.replace(/^#\/?/, '');
  const [name, arg, arg2] = h.split('/');
  return { name: name || 'cluster', arg: arg ? decodeURIComponent(arg) : '', arg2: arg2 ? decodeURIComponent(arg2) : '' };
}

// A range in seconds from the URL (#/history/S, #/node/NAME/S, #/services/S):
// 60 s to 90 days, else the one chosen last.
function urlSpan(x) {
  const n = Number(x);
  if (n >= 60 && n <= 90 * 86400) histRange.span = Math.floor(n);
}

async function render(v, gen) {
  const c = current();
  const t0 = performance.now();
  try {
    if (c.name === 'queue') await viewQueue(v);
    else if (c.name === 'job') await viewJob(v, c.arg);
    else if (c.name === 'tenants') await viewTenants(v);
    else if (c.name === 'services') await viewServices(v);
    else if (c.name === 'history') await viewHistory(v);
    else if (c.name === 'node') await viewNode(v, c.arg);
    else if (c.name === 'advise') viewAdvise(v);
    else await viewCluster(v);
    v.setAttribute('data-loaded', c.name);
    live.lastRender = performance.now();
    // ms since navigation start when this view first showed data (benchmarks read it)
    if (!v.dataset.firstMs) v.dataset.firstMs = String(Math.round(performance.now()));
    status('updated ' + new Date().toLocaleTimeString() + ' in ' + Math.round(performance.now() - t0) + ' ms');
  } catch (e) {
    if (e.message === 'unauthenticated') return;
    if (gen !== undefined && gen !== viewGen) return;
    v.replaceChildren(el('h1', {}, c.name), el('p', { class: 'error' }, e.message));
  }
}

function refresh(byEvent) {
  const v = document.getElementById('view');
  // events keep the view current: the poll only for what they do not carry
  if (!byEvent && liveOn() && current().name !== 'job' && performance.now() - live.lastRender < LIVE_POLL_MS - 100) return;
  // a poll would rebuild the filters under the user's cursor: wait for them
  const a = document.activeElement;
  if (a && v.contains(a) && (a.tagName === 'INPUT' || a.tagName === 'SELECT')) return;
  render(v, viewGen);
}

function route() {
  viewGen++;
  pendingAction = null;
  actionMsg = null;
  clearInterval(timer);
  const c = current();
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.view === c.name);
  const v = document.getElementById('view');
  v.removeAttribute('data-loaded');
  delete v.dataset.firstMs;
  render(v, viewGen);
  if (c.name !== 'advise') timer = setInterval(refresh, POLL_MS);
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('login-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = document.getElementById('token').value.trim();
    document.getElementById('token').value = '';
    if (t) login(t);
  });
  document.getElementById('logout').addEventListener('click', () => logout(''));
  document.getElementById('view').addEventListener('click', (e) => {
    const g = e.target.closest && e.target.closest('.gpu[data-job]');
    if (g) location.hash = '#/job/' + encodeURIComponent(g.dataset.job);
  });
  window.addEventListener('hashchange', () => { if (token()) route(); });
  if (token()) login(token()); else showLogin('');
});
