// The console's DOM and HTTP helpers. Every text the console did not write
// (from a model, a server or a user) reaches the page through h() or
// setText(), as text nodes: nothing is ever parsed as HTML.

// h builds an element. attrs: "on<event>" keys take listeners, "class"
// and other keys are attributes (false/null/undefined leave them out,
// true sets them empty); children are nodes or strings (as text), nested
// arrays flattened, null skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// clear empties el and appends children.
export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// A press of the pointer (mouse, pen or touch) is under way from its
// pointerdown to its release. Redraws wait for the release (afterPress):
// a browser drops a click whose element left the page between the press
// and the release, even for a moment.
let pressed = false;
let released = [];
function release() {
  if (!pressed) return;
  pressed = false;
  const waiting = released;
  released = [];
  // After this event's task, in which the click is dispatched.
  setTimeout(() => waiting.forEach((resolve) => resolve()), 0);
}
addEventListener('pointerdown', () => { pressed = true; }, { capture: true });
addEventListener('pointerup', release, { capture: true });
addEventListener('pointercancel', release, { capture: true });
addEventListener('blur', release); // the window's own (an element's does not bubble)

// afterPress resolves at once, or once the press under way was released
// and its click dispatched: a redraw awaits it before it replaces what
// may be pressed.
export function afterPress() {
  return pressed ? new Promise((resolve) => released.push(resolve)) : Promise.resolve();
}

// statusBadge shows a run's or a server's status.
export function statusBadge(status) {
  return h('span', { class: 'status status-' + String(status).replace(/[^a-z_]/g, '') }, status || 'unknown');
}

// safeURL returns u when it is an http(s) URL that may become a link, else ''.
export function safeURL(u) {
  try {
    const p = new URL(u);
    return p.protocol === 'https:' || p.protocol === 'http:' ? p.href : '';
  } catch { return ''; }
}

// cutText shows text cut at max characters with a button that shows it all.
export function cutText(text, max = 2000, tag = 'pre') {
  const el = h(tag, {});
  if (text.length <= max) { el.textContent = text; return el; }
  el.textContent = text.slice(0, max) + '…';
  const more = h('button', { type: 'button', onclick: () => { el.textContent = text; more.remove(); } },
    `Show all (${text.length.toLocaleString()} characters)`);
  return h('div', {}, el, more);
}

// pretty renders JSON text (or a value) indented, or the text as it is.
export function pretty(v) {
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// titleOf names a run or a conversation: its title when the API gives
// one, else the first line of its prompt (or of its first message), cut,
// else its id.
export function titleOf(x, max = 80) {
  if (x.title) return x.title;
  const first = x.prompt || (x.messages || []).find((m) => m && m.role === 'user' && m.content)?.content || '';
  const line = first.split(/\r?\n/).map((l) => l.trim()).find(Boolean) || '';
  if (!line) return x.id;
  return [...line].length > max ? [...line].slice(0, max - 1).join('') + '…' : line;
}

// changeView shows how a tool's definition changed, from a change as the
// API reports it (a held tool of GET /v1/mcp/servers, an accepted one, the
// data of an mcp.tool.changed event): the fields that differ, the
// description before and after when it is one of them, the digests.
export function changeView(ch) {
  const changed = ch.changed || [];
  const short = (d) => String(d || '').slice(0, 12);
  return h('div', { class: 'change' },
    h('p', {}, 'Changed: ', changed.length ? changed.map((f, i) => [i ? ', ' : '', h('code', {}, f)]) : '(no field named)'),
    changed.includes('description') ? h('dl', { class: 'diff' },
      h('dt', {}, 'Description before'), h('dd', { class: 'old' }, ch.old_description || '(none)'),
      h('dt', {}, 'Description after'), h('dd', { class: 'new' }, ch.new_description || '(none)')) : null,
    h('p', { class: 'meta' }, `Pinned ${short(ch.old_digest)}, listed ${short(ch.new_digest)}${ch.seen_at ? ` on ${fmtTime(ch.seen_at)}` : ''}.`));
}

export function fmtTime(t) { return t ? new Date(t).toLocaleString() : ''; }

// fmtAge says how long ago t was, coarsely.
export function fmtAge(t, now = Date.now()) {
  if (!t) return '';
  return fmtSpan(now - new Date(t).getTime()) + ' ago';
}

// fmtSpan formats milliseconds as 850 ms, 12 s, 3 min, 2 h, 4 d.
export function fmtSpan(ms) {
  if (ms < 0 || !isFinite(ms)) return '';
  if (ms < 1000) return Math.round(ms) + ' ms';
  const s = ms / 1000;
  if (s < 90) return Math.round(s) + ' s';
  if (s < 5400) return Math.round(s / 60) + ' min';
  if (s < 172800) return Math.round(s / 3600) + ' h';
  return Math.round(s / 86400) + ' d';
}

// An APIError is a non-2xx answer: status, the API's error code and message.
export class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

const keyName = 'harnessd.key';
export const auth = {
  get key() { return sessionStorage.getItem(keyName) || ''; },
  set key(v) { if (v) sessionStorage.setItem(keyName, v); else sessionStorage.removeItem(keyName); },
};

function headers(extra) {
  const hd = { Accept: 'application/json', ...extra };
  if (auth.key) hd.Authorization = 'Bearer ' + auth.key;
  return hd;
}

// api calls a route and returns its decoded JSON (null for 204); a non-2xx
// answer throws an APIError with the API's own message.
export async function api(method, path, body, signal) {
  const init = { method, headers: headers(), cache: 'no-store', signal };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    const e = data && data.error;
    throw new APIError(res.status, e ? e.code : 'http_' + res.status, e ? e.message : `${method} ${path}: ${res.status} ${res.statusText}`);
  }
  return data;
}

// followEvents reads GET /v1/runs/{id}/events as SSE with fetch (so the key
// travels in a header, never in the URL), calling onEvent(ev) for each
// event with ev.seq set for kept events. It reconnects after a dropped
// stream from the last kept event, and resolves when the run's terminal
// event arrived or signal aborted.
export async function followEvents(id, onEvent, signal, isEnd) {
  let last = 0;
  for (let attempt = 0; !signal.aborted; attempt++) {
    let ended = false;
    try {
      const hd = headers({ Accept: 'text/event-stream' });
      if (last) hd['Last-Event-ID'] = String(last);
      const res = await fetch(`/v1/runs/${encodeURIComponent(id)}/events`, { headers: hd, cache: 'no-store', signal });
      if (!res.ok) {
        const text = await res.text();
        let msg = `${res.status} ${res.statusText}`;
        try { msg = JSON.parse(text).error.message; } catch { /* keep the status */ }
        throw new APIError(res.status, 'events', msg);
      }
      attempt = 0;
      await readSSE(res.body, (ev) => {
        if (ev.seq) last = ev.seq;
        onEvent(ev);
        if (isEnd(ev)) ended = true;
      });
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof APIError && err.status < 500) throw err;
    }
    if (ended || signal.aborted) return;
    await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** attempt, 5000)));
  }
}

// readSSE parses an event stream: "id:", "event:" and "data:" lines, a
// blank line ends an event, ":" lines are comments.
async function readSSE(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let ev = { id: '', type: '', data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') {
        if (ev.data.length) dispatch(ev, onEvent);
        ev = { id: '', type: '', data: [] };
        continue;
      }
      if (line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let val = i < 0 ? '' : line.slice(i + 1);
      if (val.startsWith(' ')) val = val.slice(1);
      if (field === 'data') ev.data.push(val);
      else if (field === 'event') ev.type = val;
      else if (field === 'id') ev.id = val;
    }
  }
}

function dispatch(raw, onEvent) {
  let parsed;
  try { parsed = JSON.parse(raw.data.join('\n')); } catch { return; }
  if (!parsed || typeof parsed !== 'object') return;
  if (!parsed.type && raw.type) parsed.type = raw.type;
  if (!parsed.seq && raw.id) parsed.seq = Number(raw.id) || 0;
  onEvent(parsed);
}
