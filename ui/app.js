// Corral dashboard: one page, hash routes, data from the v1 API with the
// user's own token (sessionStorage, sent as an Authorization header; never
// in a URL). Every value is rendered with textContent: no HTML from data.
'use strict';

const POLL_MS = 2000;
const KEY = 'corral.token';
let timer = null;
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

function jobLink(id) { return el('a', { href: '#/job/' + encodeURIComponent(id) }, String(id)); }
function fmt(x, d) { return typeof x === 'number' ? x.toFixed(d === undefined ? 1 : d) : (x === null || x === undefined ? '' : String(x)); }
function status(t) { document.getElementById('status').textContent = t; }

function logout(why) {
  sessionStorage.removeItem(KEY);
  showLogin(why || '');
}

function showLogin(msg) {
  clearInterval(timer);
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
    const me = await getJSON('/v1/whoami');
    document.getElementById('who').textContent = me.role + (me.role === 'user' ? ' ' + me.name + ' (tenant ' + me.tenant + ')' : ' ' + me.name);
    document.getElementById('login').hidden = true;
    document.getElementById('view').hidden = false;
    document.getElementById('nav').hidden = false;
    document.getElementById('logout').hidden = false;
    route();
  } catch (e) {
    if (e.message !== 'unauthenticated') showLogin(e.message);
  }
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
            el('div', { class: 'node-name' }, n.name + ' (' + n.state + (n.reason ? ': ' + n.reason : '') + ')'),
            ...[...doms.entries()].map(([k, gs]) => el('div', { class: 'domain', title: k }, ...gs)));
        })));
    }
    groups.push(el('div', { class: 'group' }, el('h2', {}, t + ' - ' + ngpu + ' GPUs'), ...rackEls));
  }
  v.replaceChildren(el('h1', {}, 'Cluster'),
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

let logState = { id: null, offset: 0, text: '' };

async function viewJob(v, id) {
  let j;
  try {
    j = await getJSON('/v1/jobs/' + encodeURIComponent(id));
  } catch (e) {
    v.replaceChildren(el('h1', {}, 'Job ' + id), el('p', { class: 'error', id: 'job-error' }, e.status === 404 ? 'job ' + id + ' not found (or not yours)' : e.message));
    return;
  }
  if (logState.id !== id) logState = { id, offset: 0, text: '' };
  if (j.start_time) {
    try {
      const r = await api('/v1/jobs/' + encodeURIComponent(id) + '/logs?stream=stdout&offset=' + logState.offset);
      if (r.ok) {
        const buf = await r.arrayBuffer();
        logState.offset += buf.byteLength;
        logState.text += new TextDecoder().decode(buf);
        if (logState.text.length > 200000) logState.text = logState.text.slice(-200000);
      }
    } catch (e) { /* the agent may be gone: the page still shows the rest */ }
  }
  const spec = Object.assign({}, j);
  delete spec.events;
  v.replaceChildren(el('h1', {}, 'Job ' + j.id + ' ' + (j.name || '')),
    table(['state', 'tenant', 'gpus', 'type', 'reason', 'exit', 'retries'],
      [[el('span', { id: 'job-state' }, j.state), j.tenant, j.gpus, j.run_gpu_type || j.gpu_type, el('span', { id: 'job-reason' }, j.reason || ''), j.exit_code, j.retries]]),
    el('h2', {}, 'Placement'),
    table(['node', 'GPUs', 'UUIDs'], (j.placement || []).map((p) => [p.node, (p.gpus || []).join(','), (p.gpu_uuids || []).join(' ')])),
    el('h2', {}, 'Events'),
    table(['time', 'what', 'why'], (j.events || []).map((e) => [e.time, e.what, e.why])),
    el('h2', {}, 'Logs (stdout, live)'),
    el('pre', { class: 'logs', id: 'job-logs' }, logState.text),
    el('h2', {}, 'Spec'),
    el('pre', {}, JSON.stringify(spec, null, 2)));
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
  const detail = await Promise.all(d.items.map((s) => getJSON('/v1/services/' + encodeURIComponent(s.name)).catch(() => s)));
  const parts = [el('h1', {}, 'Services')];
  parts.push(table(['service', 'tenant', 'replicas (ready/desired)', 'min..max', 'in flight', 'req/s', 'p95 ms'],
    detail.map((s) => [s.name, s.tenant, (s.ready_replicas || 0) + ' / ' + (s.desired_replicas || 0), s.min_replicas + '..' + s.max_replicas,
      fmt(s.load && s.load.in_flight), fmt(s.load && s.load.rps, 2), s.load && s.load.p95_ms >= 0 ? fmt(s.load.p95_ms, 0) : ''])));
  for (const s of detail) {
    parts.push(el('h2', {}, s.name));
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
  const [name, arg] = h.split('/');
  return { name: name || 'cluster', arg: arg ? decodeURIComponent(arg) : '' };
}

async function render(v, gen) {
  const c = current();
  const t0 = performance.now();
  try {
    if (c.name === 'queue') await viewQueue(v);
    else if (c.name === 'job') await viewJob(v, c.arg);
    else if (c.name === 'tenants') await viewTenants(v);
    else if (c.name === 'services') await viewServices(v);
    else if (c.name === 'advise') viewAdvise(v);
    else await viewCluster(v);
    v.setAttribute('data-loaded', c.name);
    // ms since navigation start when this view first showed data (benchmarks read it)
    if (!v.dataset.firstMs) v.dataset.firstMs = String(Math.round(performance.now()));
    status('updated ' + new Date().toLocaleTimeString() + ' in ' + Math.round(performance.now() - t0) + ' ms');
  } catch (e) {
    if (e.message === 'unauthenticated') return;
    if (gen !== undefined && gen !== viewGen) return;
    v.replaceChildren(el('h1', {}, c.name), el('p', { class: 'error' }, e.message));
  }
}

function refresh() {
  const v = document.getElementById('view');
  // a poll would rebuild the filters under the user's cursor: wait for them
  const a = document.activeElement;
  if (a && v.contains(a) && (a.tagName === 'INPUT' || a.tagName === 'SELECT')) return;
  render(v, viewGen);
}

function route() {
  viewGen++;
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
