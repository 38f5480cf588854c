// The delayq dashboard: polls /v1/queues every second, draws two small SVG charts, and
// calls the same HTTP API as any client (with the token typed into the page).
'use strict';
const $ = (s) => document.querySelector(s);
const state = { token: sessionStorage.getItem('delayq-token') || '', selected: null, prev: null, history: {}, info: null };
$('#token').value = state.token;

function setStatus(text, err) {
  const s = $('#status');
  s.textContent = text;
  s.className = err ? 'err' : '';
}

async function api(method, path, body) {
  const headers = { 'content-type': 'application/json' };
  if (state.token) headers.authorization = 'Bearer ' + state.token;
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((data.error && (data.error.kind + ': ' + data.error.message)) || ('HTTP ' + r.status));
  return data;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// Quantile from a cumulative histogram [[bound, count], ...].
function quantile(buckets, total, q) {
  if (!total) return null;
  const want = q * total;
  for (const [bound, n] of buckets) if (n >= want) return bound;
  return Infinity;
}
const fmtS = (s) => s === null ? '–' : s === Infinity ? '>60 s' : s < 1 ? (s * 1000) + ' ms' : s + ' s';

function rate(name, kind, field, now) {
  const h = state.history[kind + ':' + name];
  if (!h || h.length < 2) return 0;
  const a = h[Math.max(0, h.length - 6)], b = h[h.length - 1];
  const dt = (b.t - a.t) / 1000;
  return dt > 0 ? Math.max(0, (b.totals[field] - a.totals[field]) / dt) : 0;
}

function remember(kind, q, t) {
  const key = kind + ':' + q.name;
  const h = state.history[key] || (state.history[key] = []);
  h.push({ t, totals: q.totals });
  while (h.length > 121) h.shift();
}

function renderReliable(list, t) {
  const body = $('#reliable tbody');
  body.replaceChildren();
  $('#reliable-empty').hidden = list.length > 0;
  for (const q of list) {
    remember('r', q, t);
    const c = q.counts || {};
    const tt = q.totals;
    const late = fmtS(quantile(tt.lateness_buckets, tt.lateness_count, 0.5)) + ' / ' + fmtS(quantile(tt.lateness_buckets, tt.lateness_count, 0.99));
    const row = el('tr', { class: 'q' + (state.selected === q.name ? ' sel' : ''), 'data-queue': q.name, onclick: () => select(q.name) },
      el('td', {}, q.name, q.error ? el('span', { class: 'muted' }, ' (' + q.error + ')') : ''),
      el('td', { class: 'n', 'data-count': 'delayed' }, c.delayed ?? '–'),
      el('td', { class: 'n', 'data-count': 'ready' }, c.ready ?? '–'),
      el('td', { class: 'n', 'data-count': 'in_flight' }, c.in_flight ?? '–'),
      el('td', { class: 'n', 'data-count': 'dead' }, c.dead ?? '–'),
      el('td', { class: 'n' }, rate(q.name, 'r', 'offered').toFixed(1)),
      el('td', { class: 'n' }, rate(q.name, 'r', 'delivered').toFixed(1)),
      el('td', { class: 'n' }, rate(q.name, 'r', 'acked').toFixed(1)),
      el('td', { class: 'n' }, late));
    body.append(row);
  }
}

function renderDelayed(list, t) {
  const body = $('#delayed tbody');
  body.replaceChildren();
  for (const q of list) {
    remember('d', q, t);
    const c = q.counts || {};
    body.append(el('tr', { 'data-queue': q.name },
      el('td', {}, q.name, q.error ? el('span', { class: 'muted' }, ' (' + q.error + ')') : ''),
      el('td', { class: 'n', 'data-count': 'delayed' }, c.delayed ?? '–'),
      el('td', { class: 'n', 'data-count': 'ready' }, c.ready ?? '–'),
      el('td', { class: 'n', 'data-count': 'corrupt' }, c.corrupt ?? '–'),
      el('td', { class: 'n' }, rate(q.name, 'd', 'offered').toFixed(1)),
      el('td', { class: 'n' }, rate(q.name, 'd', 'delivered').toFixed(1))));
  }
}

const SVG = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function drawLateness(totals) {
  const svg = $('#lateness');
  svg.replaceChildren();
  const W = 520, H = 180, pad = 24;
  const b = totals.lateness_buckets;
  const counts = b.map(([, n], i) => n - (i ? b[i - 1][1] : 0));
  counts.push(totals.lateness_count - (b.length ? b[b.length - 1][1] : 0));
  const labels = b.map(([s]) => s < 1 ? (s * 1000) + 'ms' : s + 's').concat(['more']);
  const max = Math.max(1, ...counts);
  const w = (W - pad) / counts.length;
  counts.forEach((n, i) => {
    const h = (H - 2 * pad) * n / max;
    svg.append(svgEl('rect', { x: pad + i * w + 2, y: H - pad - h, width: w - 4, height: h, fill: '#4a78d0', 'data-bucket': labels[i], 'data-n': n }));
    svg.append(svgEl('text', { x: pad + i * w + w / 2, y: H - 8, 'font-size': 9, 'text-anchor': 'middle', fill: '#7a8294' }, labels[i]));
    if (n) svg.append(svgEl('text', { x: pad + i * w + w / 2, y: H - pad - h - 3, 'font-size': 9, 'text-anchor': 'middle' }, n));
  });
  svg.append(svgEl('text', { x: 4, y: 12, 'font-size': 10, fill: '#7a8294' }, totals.lateness_count + ' received'));
}

function drawRates(name) {
  const svg = $('#rates');
  svg.replaceChildren();
  const h = state.history['r:' + name] || [];
  const W = 520, H = 180, pad = 24;
  const series = { offered: [], acked: [] };
  for (let i = 1; i < h.length; i++) {
    const dt = (h[i].t - h[i - 1].t) / 1000 || 1;
    for (const k of Object.keys(series)) series[k].push(Math.max(0, (h[i].totals[k] - h[i - 1].totals[k]) / dt));
  }
  const max = Math.max(1, ...series.offered, ...series.acked);
  const colors = { offered: '#4a78d0', acked: '#2e9e5b' };
  for (const [k, pts] of Object.entries(series)) {
    if (!pts.length) continue;
    const d = pts.map((v, i) => (i ? 'L' : 'M') + (pad + (W - 2 * pad) * i / 119).toFixed(1) + ' ' + (H - pad - (H - 2 * pad) * v / max).toFixed(1)).join(' ');
    svg.append(svgEl('path', { d, fill: 'none', stroke: colors[k], 'stroke-width': 1.5 }));
  }
  svg.append(svgEl('text', { x: 4, y: 12, 'font-size': 10, fill: '#7a8294' }, 'max ' + max.toFixed(1) + '/s'));
  svg.append(svgEl('text', { x: W - 120, y: 12, 'font-size': 10, fill: colors.offered }, 'offered'));
  svg.append(svgEl('text', { x: W - 70, y: 12, 'font-size': 10, fill: colors.acked }, 'acked'));
}

function preview(b64, mode) {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const shown = bytes.slice(0, 2048);
  if (mode === 'hex') return Array.from(shown, (x) => x.toString(16).padStart(2, '0')).join(' ') + (bytes.length > shown.length ? ' …' : '');
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  if (mode === 'json') {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return '(not JSON) ' + text.slice(0, 2048); }
  }
  return text.slice(0, 2048);
}

async function loadDead() {
  if (!state.selected) return;
  const name = state.selected;
  const data = await api('GET', '/v1/queues/' + encodeURIComponent(name) + '/dead-letters?limit=50');
  if (name !== state.selected) return;
  const body = $('#dead tbody');
  body.replaceChildren();
  $('#dead-empty').hidden = data.dead_letters.length > 0;
  const mode = $('#preview').value;
  for (const d of data.dead_letters) {
    const hook = d.webhook ? (d.webhook.url + ' — ' + (d.webhook.last_status ?? '') + ' ' + (d.webhook.last_error ?? '')) : '';
    body.append(el('tr', { 'data-id': d.id },
      el('td', {}, d.id),
      el('td', { class: 'n' }, d.attempts),
      el('td', {}, new Date(d.died_at).toLocaleTimeString()),
      el('td', { class: 'muted' }, hook),
      el('td', {}, el('pre', {}, preview(d.payload_base64, mode))),
      el('td', {}, el('button', { 'data-testid': 'requeue', onclick: () => act(() => api('POST', qpath() + '/dead-letters/requeue', { ids: [d.id] }), (r) => 'requeued ' + r.requeued) }, 'Requeue'))));
  }
}

const qpath = () => '/v1/queues/' + encodeURIComponent(state.selected);

async function act(call, say) {
  try {
    const r = await call();
    setStatus(say(r));
  } catch (e) {
    setStatus(e.message, true);
  }
  await refresh();
  await loadDead().catch(() => {});
}

function select(name) {
  state.selected = name;
  $('#detail').hidden = false;
  $('#detail-name').textContent = name;
  refresh();
  loadDead().catch((e) => setStatus(e.message, true));
}

async function refresh() {
  try {
    const data = await api('GET', '/v1/queues');
    const t = Date.now();
    renderReliable(data.reliable, t);
    renderDelayed(data.delayed, t);
    $('#clock').textContent = 'Redis time ' + new Date(data.server_time).toLocaleTimeString();
    const sel = data.reliable.find((q) => q.name === state.selected);
    if (sel) { drawLateness(sel.totals); drawRates(sel.name); }
  } catch (e) {
    setStatus('could not read the queues: ' + e.message, true);
  }
}

$('#token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  state.token = $('#token').value.trim();
  sessionStorage.setItem('delayq-token', state.token);
  setStatus(state.token ? 'token set for this tab' : 'token cleared');
});
$('#cancel-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const id = $('#cancel-id').value; // as typed: an id may begin or end with spaces
  act(() => api('DELETE', qpath() + '/messages/' + encodeURIComponent(id)), () => 'cancelled ' + JSON.stringify(id));
});
$('#reschedule-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const id = $('#reschedule-id').value;
  const ms = Number($('#reschedule-ms').value || 0);
  act(() => api('POST', qpath() + '/messages/' + encodeURIComponent(id) + '/reschedule', { delay_ms: ms }), (r) => 'rescheduled ' + JSON.stringify(id) + ', due ' + new Date(r.due_at).toLocaleTimeString());
});
$('#requeue-all').addEventListener('click', () => act(() => api('POST', qpath() + '/dead-letters/requeue', {}), (r) => 'requeued ' + r.requeued));
$('#purge').addEventListener('click', () => {
  if (confirm('Delete every dead letter of ' + state.selected + '?')) act(() => api('DELETE', qpath() + '/dead-letters'), (r) => 'purged ' + r.purged);
});
$('#preview').addEventListener('change', () => loadDead().catch(() => {}));

(async () => {
  try {
    const info = await api('GET', '/v1/server');
    state.info = info;
    $('#mode').className = 'badge' + (info.read_only ? ' ro' : '');
    $('#mode').textContent = info.read_only ? 'read-only' : info.token_required ? 'token required for changes' : 'open (no token)';
  } catch (e) { setStatus(e.message, true); }
  await refresh();
  setInterval(refresh, 1000);
  setInterval(() => loadDead().catch(() => {}), 2000);
})();
