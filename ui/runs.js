// The runs page: the form that starts a run (every field of the run
// request) and the list of runs, searched (?q=), filtered by status and
// paged by next_cursor. Also the searchable list shared with the
// conversations page.
import { h, clear, api, afterPress, statusBadge, fmtAge, fmtSpan, titleOf } from './dom.js';
import { every, errorNote, loadPages, moreButton } from './pages.js';

const runStatuses = ['queued', 'running', 'waiting_input', 'waiting_approval', 'completed', 'failed', 'cancelled'];

// A column of a list: its heading, its cell for an item, and whether a
// narrow screen leaves it out (secondary) or labels it (the rest but the
// first, which spans the row).
//   { head, cell(item), secondary }

// searchList renders a searched, paged list of a route into main and
// keeps it fresh every ms; opts: route ('/v1/runs'), field ('runs'),
// hash ('#/runs'), columns, noun ('runs'), empty (text with no items and
// no search), filters (more controls: [{el, param, label, value}], value
// (optional) turning the control's value into the parameter's), before
// (nodes above the search), params (the fragment's query), search (false
// for a route that takes no q: filters only).
export function searchList(main, signal, opts) {
  const { params } = opts;
  const sid = opts.field + '-search';
  const search = opts.search === false ? null : h('input', { type: 'search', id: sid, value: params.get('q') || '', autocomplete: 'off',
    placeholder: 'words of a title or prompt', 'aria-describedby': sid + '-hint' });
  const words = () => (search ? search.value.trim() : '');
  const body = h('tbody', {});
  const note = h('div', { 'aria-live': 'polite' });
  const table = h('table', { class: 'reflow', 'aria-label': opts.noun[0].toUpperCase() + opts.noun.slice(1) },
    h('caption', { class: 'hint' }, `Newest first; refreshed every ${opts.ms / 1000} s.`),
    h('thead', {}, h('tr', {}, opts.columns.map((c) => h('th', { scope: 'col', class: c.secondary ? 'secondary' : null }, c.head)))), body);
  const filters = opts.filters || [];
  // pages is how many pages the list shows; the refresh reads them all.
  let pages = 1;
  let generation = 0;
  const query = () => {
    const q = new URLSearchParams();
    for (const f of filters) {
      const v = f.value ? f.value(f.el) : f.el.value;
      if (v) q.set(f.param, v);
    }
    if (words()) q.set('q', words());
    return q.toString();
  };
  const load = async () => {
    const gen = ++generation;
    const q = query();
    try {
      const res = await loadPages(opts.route + (q ? '?' + q : ''), opts.field, pages, signal);
      await afterPress();
      if (gen !== generation) return; // a later load (another search) answers
      clear(note);
      clear(body, res.items.map((item) => h('tr', {}, opts.columns.map((c, i) => h('td', {
        class: c.secondary ? 'secondary' : i === 0 ? 'primary' : null, 'data-label': i && !c.secondary ? c.head : null }, c.cell(item))))));
      if (!res.items.length) {
        body.append(h('tr', {}, h('td', { colspan: opts.columns.length, class: 'meta' },
          words() ? `No ${opts.noun} match “${words()}”.` : opts.empty)));
      }
      more.hidden = !res.more;
    } catch (err) { if (!signal.aborted && gen === generation) clear(note, errorNote(err)); }
  };
  const more = moreButton(opts.field + '-more', () => { pages++; load(); });
  const apply = () => {
    const q = query();
    history.replaceState(null, '', opts.hash + (q ? '?' + q : ''));
    pages = 1;
    load();
  };
  let typing = null;
  if (search) {
    search.addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(apply, 300); // once the typing pauses
    });
  }
  signal.addEventListener('abort', () => clearTimeout(typing));
  for (const f of filters) f.el.addEventListener('change', apply);
  const form = h('form', { class: 'row', role: 'search', 'aria-label': search ? null : 'Filters',
    onsubmit: (e) => { e.preventDefault(); clearTimeout(typing); apply(); } },
    search ? [h('label', { class: 'inline', for: sid }, 'Search'), h('span', { class: 'grow' }, search)] : null,
    filters.map((f) => [h('label', { class: 'inline', for: f.el.id }, f.label), f.el]),
    search ? h('span', { class: 'hint', id: sid + '-hint' }, 'Matches titles and prompts.') : h('button', { type: 'submit' }, 'Apply'));
  clear(main, opts.before, form, note, table, h('div', { class: 'row' }, more));
  every(opts.ms, load, signal);
}

// titleCell links an item's page: its title over its id, or its id.
export function titleCell(href, item) {
  const title = titleOf(item);
  return h('a', { href }, title !== item.id ? [h('span', { class: 'title' }, title), ' '] : null, h('code', { class: 'id' }, item.id));
}

export function runsPage(main, can, signal, params) {
  const filter = h('select', { id: 'status-filter' }, h('option', { value: '' }, 'All'),
    runStatuses.map((s) => h('option', { value: s, selected: params.get('status') === s }, s)));
  const cost = (u) => (typeof u.cost_usd === 'number' ? '$' + u.cost_usd.toFixed(4) : '—');
  const tokens = (u) => ((u.input_tokens || 0) + (u.output_tokens || 0)).toLocaleString();
  searchList(main, signal, {
    route: '/v1/runs', field: 'runs', hash: '#/runs', noun: 'runs', empty: 'No runs yet.', ms: 2000, params,
    filters: [{ el: filter, param: 'status', label: 'Status' }],
    before: [h('h1', {}, 'Runs'), can.write ? startForm(signal) : null],
    columns: [
      { head: 'Run', cell: (r) => titleCell('#/runs/' + encodeURIComponent(r.id), r) },
      { head: 'Status', cell: (r) => statusBadge(r.status) },
      { head: 'Model', cell: (r) => r.model, secondary: true },
      { head: 'Owner', cell: (r) => r.owner || '—', secondary: true },
      { head: 'Steps', cell: (r) => String(r.steps), secondary: true },
      { head: 'Tokens', cell: (r) => tokens(r.usage || {}) },
      { head: 'Cost', cell: (r) => cost(r.usage || {}) },
      { head: 'Age', cell: (r) => fmtAge(r.created_at) },
      { head: 'Duration', cell: (r) => (r.started_at ? fmtSpan((r.ended_at ? new Date(r.ended_at) : new Date()) - new Date(r.started_at)) : ''), secondary: true },
    ],
  });
}

// field wraps an input with its label, a hint and the line its error
// shows on.
function field(input, label, hint) {
  const error = h('div', { class: 'field-error', id: input.id + '-err', 'aria-live': 'polite' });
  input.setAttribute('aria-describedby', error.id);
  // A field's error goes once it is changed; the next send checks it again.
  input.addEventListener('input', () => { error.textContent = ''; input.setAttribute('aria-invalid', 'false'); });
  return { input, error, el: h('div', {}, h('label', { for: input.id }, label, hint ? h('span', { class: 'hint' }, ' ' + hint) : null), input, error) };
}

// readWhole reads a whole number of at least 1 from a field, or
// undefined when it is empty; it throws the error to show.
function readWhole(f, name) {
  const v = f.input.value.trim();
  if (v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a whole number of at least 1 (or empty for the default).`);
  return n;
}

// readServers reads the per-run servers: a JSON array of server objects,
// each with a name, as the API's mcp_servers takes them.
function readServers(f) {
  const v = f.input.value.trim();
  if (v === '') return undefined;
  let list;
  try { list = JSON.parse(v); } catch (err) { throw new Error(`Per-run servers: not JSON (${err.message}).`); }
  if (!Array.isArray(list)) throw new Error('Per-run servers must be a JSON array, like [{"name": "files", "command": "npx", "args": ["…"]}].');
  list.forEach((s, i) => {
    if (!s || typeof s !== 'object' || Array.isArray(s)) throw new Error(`Per-run servers: entry ${i} must be an object with a name and a command or url.`);
    if (typeof s.name !== 'string' || !s.name) throw new Error(`Per-run servers: entry ${i} has no "name".`);
  });
  return list;
}

// startForm is the form that starts a run (or continues a conversation
// when conversation is given) with the run request's fields; onStarted(runId,
// body) is called with the new run, or, when absent, its page opens.
export function startForm(signal, conversation, onStarted) {
  const prompt = h('textarea', { id: 'run-prompt', required: true, rows: 4 });
  const f = {
    profile: field(h('input', { type: 'text', id: 'run-profile', autocomplete: 'off' }), 'Profile'),
    model: field(h('input', { type: 'text', id: 'run-model', placeholder: 'provider/model', autocomplete: 'off' }), 'Model', '(default: the configured one)'),
    system: field(h('textarea', { id: 'run-system', rows: 2 }), 'System prompt', '(replaces the configured one)'),
    steps: field(h('input', { type: 'number', id: 'run-max-steps', min: 1, step: 1, inputmode: 'numeric' }), 'Max steps'),
    tokens: field(h('input', { type: 'number', id: 'run-max-tokens', min: 1, step: 1, inputmode: 'numeric' }), 'Max tokens', '(budget of the whole run)'),
    cost: field(h('input', { type: 'number', id: 'run-max-cost', min: 0, step: 'any', inputmode: 'decimal' }), 'Max cost (USD)'),
    duration: field(h('input', { type: 'text', id: 'run-max-duration', placeholder: '10m', autocomplete: 'off' }), 'Max duration', '(like 90s, 10m, 1h)'),
    approval: field(h('select', { id: 'run-approval' }, h('option', { value: '' }, "Each server's own"),
      h('option', { value: 'writes' }, 'writes: calls of tools that may write wait'), h('option', { value: 'always' }, 'always: every call waits')), 'Approval'),
    servers: field(h('textarea', { id: 'run-servers', rows: 3, spellcheck: 'false',
      placeholder: '[{"name": "files", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}]' }), 'Per-run servers', '(JSON array, as mcp_servers)'),
    conv: field(h('input', { type: 'text', id: 'run-conversation', autocomplete: 'off', value: conversation || '' }), 'Continue conversation', '(id)'),
  };
  const interactive = h('input', { type: 'checkbox', id: 'run-interactive', checked: true });
  const status = h('div', { class: 'field-error', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'primary' }, conversation ? 'Send' : 'Start run');
  const text = (x) => x.input.value.trim();
  // read returns the request's body, or null after showing each field's
  // error beside it.
  const read = () => {
    const body = { prompt: prompt.value, interactive: interactive.checked };
    const readers = [
      [f.profile, () => text(f.profile) || undefined, 'profile'],
      [f.model, () => text(f.model) || undefined, 'model'],
      [f.system, () => (f.system.input.value.trim() ? f.system.input.value : undefined), 'system_prompt'],
      [f.steps, () => readWhole(f.steps, 'Max steps'), 'max_steps'],
      [f.tokens, () => readWhole(f.tokens, 'Max tokens'), 'max_tokens'],
      [f.cost, () => {
        if (!text(f.cost)) return undefined;
        const n = Number(text(f.cost));
        if (!isFinite(n) || n <= 0) throw new Error('Max cost must be an amount of US dollars above 0 (or empty for the default).');
        return n;
      }, 'max_cost_usd'],
      [f.duration, () => text(f.duration) || undefined, 'max_duration'],
      [f.approval, () => f.approval.input.value || undefined, 'approval'],
      [f.servers, () => readServers(f.servers), 'mcp_servers'],
      [f.conv, () => text(f.conv) || undefined, 'conversation_id'],
    ];
    let ok = true;
    for (const [fl, get, key] of readers) {
      try {
        const v = get();
        if (v !== undefined) body[key] = v;
        fl.error.textContent = '';
        fl.input.setAttribute('aria-invalid', 'false');
      } catch (err) {
        fl.error.textContent = err.message;
        fl.input.setAttribute('aria-invalid', 'true');
        if (ok) extra.open = true;
        ok = false;
      }
    }
    return ok ? body : null;
  };
  const onsubmit = async (e) => {
    e.preventDefault();
    if (!prompt.value.trim()) { status.textContent = 'Write a prompt first.'; prompt.focus(); return; }
    const body = read();
    if (!body) { status.textContent = 'Fix the fields marked above.'; return; }
    submit.disabled = true;
    try {
      const res = await api('POST', '/v1/runs', body, signal);
      status.textContent = '';
      prompt.value = '';
      if (onStarted) onStarted(res.run_id, body);
      else location.hash = '#/runs/' + encodeURIComponent(res.run_id);
    } catch (err) {
      status.textContent = err.message;
    } finally { submit.disabled = false; }
  };
  const shown = Object.entries(f).filter(([k]) => !(conversation && k === 'conv')).map(([, x]) => x);
  const extra = h('details', { class: 'options' }, h('summary', {}, 'Options'),
    h('div', { class: 'grid' }, shown.filter((x) => x !== f.servers && x !== f.system).map((x) => x.el)),
    f.system.el, f.servers.el,
    h('label', { class: 'inline', for: 'run-interactive' }, interactive, 'Interactive: servers may ask questions (calls that need approval wait for a decision either way)'));
  return h('form', { class: 'card', onsubmit, novalidate: true, 'aria-label': conversation ? 'Continue the conversation' : 'Start a run' },
    h('label', { for: 'run-prompt' }, conversation ? 'Next prompt' : 'Prompt'), prompt, extra,
    h('div', { class: 'row' }, submit), status);
}
