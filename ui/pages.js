// The console's pages of a run, the servers and the schedules, and the
// helpers of every list page (runs.js and conversations.js hold the runs
// and conversations pages). Each page function renders into main and
// returns nothing; signal aborts its timers and streams.
import { h, clear, api, afterPress, statusBadge, cutText, pretty, fmtTime, safeURL, changeView } from './dom.js';
import { runView } from './run.js';
import { schemaForm } from './form.js';

// every calls fn now and then every ms until signal aborts.
export function every(ms, fn, signal) {
  fn();
  const t = setInterval(fn, ms);
  signal.addEventListener('abort', () => clearInterval(t));
}

export function errorNote(err) { return h('p', { class: 'notice bad', role: 'alert' }, err.message); }

// loadPages reads the first pages pages of a list route (path with its
// query), following next_cursor, and returns the items under field and
// whether more follow.
export async function loadPages(path, field, pages, signal) {
  const items = [];
  let cursor = '';
  for (let i = 0; i < pages; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const data = await api('GET', path + (cursor ? sep + 'cursor=' + encodeURIComponent(cursor) : ''), undefined, signal);
    items.push(...(data[field] || []));
    cursor = data.next_cursor || '';
    if (!cursor) break;
  }
  return { items, more: cursor !== '' };
}

// moreButton returns the button that shows one more page of a list: it
// calls onMore; the list hides it when no page is left.
export function moreButton(id, onMore) {
  return h('button', { type: 'button', id, hidden: true, onclick: onMore }, 'Show more');
}

export function runPage(main, can, signal, id) {
  clear(main, h('p', {}, h('a', { href: '#/runs' }, '← Runs')), runView(id, can, signal));
}

export function serversPage(main, can, signal) {
  const list = h('div', {});
  clear(main, h('h1', {}, 'Servers'), list);
  // tries keeps each server's "try a tool" panel and notes its action's
  // outcome, so that a redraw moves them into the new card as they are.
  const state = { open: new Set(), detail: new Map(), last: '', tries: new Map(), notes: new Map() };
  state.refresh = () => { state.last = ''; load(); };
  const load = async () => {
    try {
      const data = await api('GET', '/v1/mcp/servers', undefined, signal);
      await afterPress();
      const text = JSON.stringify(data);
      if (text === state.last) return; // unchanged: keep what the reader opened
      state.last = text;
      clear(list, (data.servers || []).map((s) => serverCard(s, can, state, signal)));
      if (!data.servers || !data.servers.length) list.append(h('p', { class: 'meta' }, 'No global servers are configured.'));
    } catch (err) { if (!signal.aborted) { state.last = ''; clear(list, errorNote(err)); } }
  };
  every(5000, load, signal);
}

function toolItems(tools) {
  return tools.map((t) => h('li', {}, h('code', {}, t.name), t.description ? h('span', { class: 'meta' }, ' — ' + t.description) : null,
    t.input_schema ? h('details', {}, h('summary', {}, 'Input schema'), cutText(pretty(t.input_schema))) : null));
}

function serverCard(s, can, state, signal) {
  const list = h('ul', {}, toolItems(state.detail.get(s.name) || s.tools || []));
  const tools = h('details', { open: state.open.has(s.name) }, h('summary', {}, `${(s.tools || []).length} tools`), list);
  const load = async () => {
    try {
      const d = await api('GET', `/v1/mcp/servers/${encodeURIComponent(s.name)}`, undefined, signal);
      state.detail.set(s.name, d.tools || []);
      clear(list, toolItems(d.tools || []));
    } catch (err) { if (!signal.aborted) clear(list, h('li', { class: 'error' }, err.message)); }
  };
  tools.addEventListener('toggle', () => {
    if (tools.open) { state.open.add(s.name); load(); } else state.open.delete(s.name);
  });
  const approval = (s.approval || 'never') + ((s.approval_tools || []).length ? ` · always for ${s.approval_tools.join(', ')}` : '');
  const facts = [
    ['Transport', s.transport], ['Source', s.source], ['Approval', approval], ['Protocol', s.protocol_version],
    ['Server', s.server_info ? `${s.server_info.name} ${s.server_info.version || ''}` : ''], ['Restarts', String(s.restarts ?? 0)],
    ['Next retry', s.next_retry ? fmtTime(s.next_retry) : ''],
  ].filter(([, v]) => v);
  return h('div', { class: 'card' },
    h('div', { class: 'row' }, h('h2', { class: 'grow' }, s.name), statusBadge(s.status)),
    h('dl', { class: 'grid' }, facts.map(([k, v]) => h('div', {}, h('dt', { class: 'meta' }, k), h('dd', {}, v)))),
    s.error ? h('p', { class: 'error' }, s.error) : null,
    heldBox(s, can, state, signal),
    can.admin && s.stderr_tail ? h('details', {}, h('summary', {}, 'Stderr'), cutText(s.stderr_tail)) : null,
    can.admin && s.status === 'needs_auth' ? loginBox(s.name, signal) : null,
    can.admin ? serverActions(s, state, signal) : null,
    tools,
    can.admin && s.status !== 'disabled' ? tryPanel(s.name, state, signal) : null);
}

// actionNote returns the line where a server's card says how its last
// admin action went; it lives in state.notes, so that it outlasts redraws.
function actionNote(name, state) {
  const note = state.notes.get(name) || h('div', { class: 'field-error', 'aria-live': 'polite' });
  state.notes.set(name, note);
  return note;
}

// adminAction returns the click handler of an admin's button that POSTs
// body to path, then says done (or done(answer)) in note and redraws the
// servers, or says in note why what failed.
function adminAction(path, body, what, done, note, state, signal) {
  return async (e) => {
    e.target.disabled = true;
    note.textContent = '';
    try {
      const res = await api('POST', path, body, signal);
      note.textContent = typeof done === 'function' ? done(res) : done;
      state.refresh();
    } catch (err) { if (!signal.aborted) { note.textContent = `${what}: ${err.message}`; e.target.disabled = false; } }
  };
}

// heldBox lists the server's tools held out of every catalog because
// their definition changed since it was pinned (pin_tools = "hold"), each
// with the difference; an admin gets an Accept button for each tool and,
// with more than one, for all (POST /v1/mcp/servers/{name}/accept).
function heldBox(s, can, state, signal) {
  const held = s.held || [];
  if (!held.length) return null;
  const note = actionNote(s.name, state);
  const accept = (tool) => adminAction(`/v1/mcp/servers/${encodeURIComponent(s.name)}/accept`, tool ? { tool } : {}, 'Accept',
    (res) => ((res.accepted || []).length ? `Accepted ${res.accepted.map((a) => a.tool).join(', ')}: offered again.` : 'Nothing was held.'), note, state, signal);
  return h('section', { class: 'held', 'aria-label': 'Held tools of ' + s.name },
    h('h3', {}, held.length === 1 ? '1 tool held' : `${held.length} tools held`),
    h('p', { class: 'hint' }, 'Their definition changed since it was pinned: no run is offered them until an admin accepts the change.'),
    h('ul', {}, held.map((ch) => h('li', {}, h('code', {}, ch.tool), changeView(ch),
      can.admin ? h('button', { type: 'button', 'aria-label': 'Accept ' + ch.tool, onclick: accept(ch.tool) }, 'Accept') : null))),
    can.admin && held.length > 1 ? h('button', { type: 'button', onclick: accept('') }, 'Accept all') : null,
    can.admin ? null : h('p', { class: 'meta' }, 'An admin key can accept them here, or with harnessd mcp accept.'));
}

// serverActions are an admin's buttons for a server: restart it, and
// enable or disable it (written to its config file by the API, which
// refuses servers that do not come from one and says why).
function serverActions(s, state, signal) {
  const note = actionNote(s.name, state);
  const path = `/v1/mcp/servers/${encodeURIComponent(s.name)}`;
  const act = (what, sub, done) => adminAction(path + sub, {}, what, done, note, state, signal);
  const disabled = s.status === 'disabled';
  return h('div', {}, h('div', { class: 'row' },
    disabled ? null : h('button', { type: 'button', onclick: act('Restart', '/restart', 'Restarted: a new connection is starting.') }, 'Restart'),
    disabled ? h('button', { type: 'button', onclick: act('Enable', '/enable', 'Enabled; it is starting.') }, 'Enable')
      : h('button', { type: 'button', class: 'danger', onclick: act('Disable', '/disable', 'Disabled: enabled = false is in its config file.') }, 'Disable')), note);
}

// tryPanel is the form that calls one of a server's tools through the API
// (POST /v1/mcp/servers/{name}/tools/{tool}/call) and shows the result.
// Its arguments are a form from the tool's input schema when the schema
// is flat, else JSON. It lives in state.tries: redraws keep what was typed
// and the last result.
function tryPanel(name, state, signal) {
  if (state.tries.has(name)) return state.tries.get(name);
  const id = 'try-' + name.replace(/[^A-Za-z0-9_-]/g, '');
  const tool = h('select', { id: id + '-tool' }, h('option', { value: '' }, 'Choose a tool…'));
  const args = h('div', {});
  const result = h('div', { 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'primary', disabled: true }, 'Call');
  let tools = [];
  let read = null;
  const choose = () => {
    const t = tools.find((x) => x.server_tool === tool.value);
    submit.disabled = !t;
    read = t ? argumentsForm(t.input_schema, id, args) : null;
  };
  tool.addEventListener('change', choose);
  const panel = h('details', { class: 'try' }, h('summary', {}, 'Try a tool'),
    h('form', { 'aria-label': 'Try a tool of ' + name, onsubmit: async (e) => {
      e.preventDefault();
      const r = read && read();
      if (!r || !r.ok) return;
      submit.disabled = true;
      clear(result, h('p', { class: 'meta' }, 'Calling…'));
      try {
        const res = await api('POST', `/v1/mcp/servers/${encodeURIComponent(name)}/tools/${encodeURIComponent(tool.value)}/call`, { arguments: r.content }, signal);
        const isError = res.result && res.result.isError;
        clear(result, h('p', { class: isError ? 'error' : 'meta' }, isError ? 'The tool reported an error:' : 'Result:'),
          cutText(resultText(res.result), 4000, 'pre'));
      } catch (err) { if (!signal.aborted) clear(result, h('p', { class: 'error', role: 'alert' }, err.message)); }
      submit.disabled = false;
    } },
    h('label', { for: id + '-tool' }, 'Tool'), tool, args, h('div', { class: 'row' }, submit), result));
  panel.addEventListener('toggle', async () => {
    if (!panel.open || tools.length) return;
    try {
      const d = await api('GET', `/v1/mcp/servers/${encodeURIComponent(name)}`, undefined, signal);
      tools = d.tools || [];
      tool.append(...tools.map((t) => h('option', { value: t.server_tool }, t.server_tool)));
    } catch (err) { if (!signal.aborted) clear(result, h('p', { class: 'error' }, err.message)); }
  });
  state.tries.set(name, panel);
  return panel;
}

// argumentsForm fills el with the fields of a tool's input schema and
// returns its read(): {ok, content}. A schema of flat properties gets a
// field each (form.js); any other, a JSON box.
function argumentsForm(schema, id, el) {
  const props = (schema && schema.properties) || {};
  const flat = Object.values(props).every((p) => p && (['string', 'number', 'integer', 'boolean'].includes(p.type) || Array.isArray(p.enum)));
  if (flat) {
    const f = schemaForm(schema, id + '-arg');
    clear(el, f.el);
    return () => f.read();
  }
  const box = h('textarea', { id: id + '-json', rows: 4 }, '{}');
  const error = h('div', { class: 'field-error', 'aria-live': 'polite' });
  clear(el, h('label', { for: id + '-json' }, 'Arguments ', h('span', { class: 'hint' }, '(a JSON object)')), box, error);
  return () => {
    try {
      const content = JSON.parse(box.value || '{}');
      if (!content || typeof content !== 'object' || Array.isArray(content)) throw new Error('not an object');
      error.textContent = '';
      return { ok: true, content };
    } catch (err) {
      error.textContent = 'Arguments: write a JSON object, like {"name": "value"} (' + err.message + ')';
      return { ok: false };
    }
  };
}

// resultText is a tool result as text: its text blocks, else the whole
// result as JSON.
function resultText(res) {
  const texts = ((res && res.content) || []).filter((c) => c.type === 'text').map((c) => c.text);
  return texts.length ? texts.join('\n') : pretty(res || {});
}

// loginBox runs an OAuth login for a server: it opens the authorization
// URL, then takes the URL the browser was redirected to.
function loginBox(name, signal) {
  const status = h('div', { class: 'field-error', 'aria-live': 'polite' });
  const rid = 'redirect-' + name.replace(/[^A-Za-z0-9_-]/g, '');
  const redirected = h('input', { type: 'url', id: rid, placeholder: 'http://127.0.0.1:8788/callback?code=…' });
  const path = `/v1/mcp/servers/${encodeURIComponent(name)}/login`;
  const link = h('p', {});
  const start = async () => {
    try {
      const res = await api('POST', path, {}, signal);
      const url = safeURL(res.authorization_url || '');
      if (!url) { status.textContent = res.status === 'logged_in' ? 'Logged in.' : 'The server gave no http(s) authorization URL.'; return; }
      clear(link, h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, 'Open the authorization page'));
      window.open(url, '_blank', 'noopener,noreferrer');
    } catch (err) { status.textContent = err.message; }
  };
  const complete = async (e) => {
    e.preventDefault();
    try {
      await api('POST', path, { redirected_url: redirected.value.trim() }, signal);
      status.textContent = 'Logged in; the server reconnects on its next retry.';
    } catch (err) { status.textContent = err.message; }
  };
  return h('form', { class: 'card', onsubmit: complete, 'aria-label': 'Log in to ' + name },
    h('p', {}, 'This server needs an OAuth login.'), h('button', { type: 'button', onclick: start }, 'Start login'), link,
    h('label', { for: rid }, 'Then paste the address the browser ended on'), redirected,
    h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, 'Complete login')), status);
}

export function schedulesPage(main, can, signal) {
  const list = h('div', {});
  clear(main, h('h1', {}, 'Schedules'), list);
  every(5000, async () => {
    try {
      const data = await api('GET', '/v1/schedules', undefined, signal);
      await afterPress();
      const items = data.schedules || [];
      clear(list, items.length ? h('div', { class: 'scroll' }, h('table', {}, h('thead', {}, h('tr', {}, ['Name', 'When', 'Next run', 'Last run', ''].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, items.map((s) => h('tr', {},
          h('td', {}, s.name), h('td', {}, h('code', {}, s.cron), s.timezone ? h('div', { class: 'meta' }, s.timezone) : null),
          h('td', {}, fmtTime(s.next_run_at)),
          h('td', {}, s.last_run_id ? [h('a', { href: '#/runs/' + encodeURIComponent(s.last_run_id) }, h('code', {}, s.last_run_id)), ' ', statusBadge(s.last_status)] : '—'),
          h('td', {}, can.admin ? h('button', { type: 'button', onclick: async (e) => {
            e.target.disabled = true;
            try {
              const res = await api('POST', `/v1/schedules/${encodeURIComponent(s.name)}/run`, {}, signal);
              location.hash = '#/runs/' + encodeURIComponent(res.run_id);
            } catch (err) { alert(err.message); e.target.disabled = false; }
          } }, 'Run now') : null))))))
        : h('p', { class: 'meta' }, 'No schedules are configured ([[schedules]] in config.toml).'));
    } catch (err) { if (!signal.aborted) clear(list, errorNote(err)); }
  }, signal);
}
