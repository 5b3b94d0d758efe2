// The audit page (admin keys only): the records of GET /v1/audit, newest
// first, filtered by key, server, tool, type and time as the API filters
// them, paged by next_cursor through the runs page's list (searchList).
import { h, fmtTime, fmtSpan } from './dom.js';
import { searchList } from './runs.js';

const auditTypes = ['tool_call', 'admin', 'refused', 'tool_changed'];

// localInput returns the value of a datetime-local control for an RFC 3339
// time, '' for none or a time that does not parse.
function localInput(t) {
  const d = t ? new Date(t) : null;
  if (!d || isNaN(d)) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// rfc3339 reads a datetime-local control as the API's RFC 3339 time, ''
// when it is empty.
function rfc3339(el) {
  const d = el.value ? new Date(el.value) : null;
  return d && !isNaN(d) ? d.toISOString().replace(/\.\d{3}Z$/, 'Z') : '';
}

// outcome says how a record ended: a tool call's outcome, an admin
// action's HTTP status, the refused requests of a minute by reason.
function outcome(r) {
  if (r.outcome) return h('span', { class: 'outcome outcome-' + String(r.outcome).replace(/[^a-z_]/g, '') }, r.outcome);
  if (r.status) return 'HTTP ' + r.status;
  if (r.refused) return Object.entries(r.refused).map(([why, n]) => `${why} ×${n}`).join(', ');
  return '';
}

export function auditPage(main, can, signal, params) {
  const text = (param, label, placeholder) => ({ param, label,
    el: h('input', { type: 'text', id: 'audit-' + param, value: params.get(param) || '', placeholder, autocomplete: 'off', size: 12 }) });
  const when = (param, label) => ({ param, label, value: rfc3339,
    el: h('input', { type: 'datetime-local', id: 'audit-' + param, value: localInput(params.get(param)) }) });
  const type = h('select', { id: 'audit-type' }, h('option', { value: '' }, 'All'),
    auditTypes.map((t) => h('option', { value: t, selected: params.get('type') === t }, t)));
  searchList(main, signal, {
    route: '/v1/audit', field: 'records', hash: '#/audit', noun: 'records', ms: 5000, params, search: false,
    empty: 'No audit records match.',
    before: [h('h1', {}, 'Audit'),
      h('p', { class: 'hint' }, 'Each tool call, admin action and minute of refused requests, as harnessd audit verify checks them.')],
    filters: [text('key', 'Key', 'key name'), text('server', 'Server', 'server'), text('tool', 'Tool', 'tool'),
      { el: type, param: 'type', label: 'Type' }, when('since', 'Since'), when('until', 'Until')],
    columns: [
      { head: 'Time', cell: (r) => h('time', { datetime: r.time }, fmtTime(r.time)) },
      { head: 'Type', cell: (r) => r.type },
      { head: 'Key', cell: (r) => r.key || '—' },
      { head: 'Run', cell: (r) => (r.run ? h('a', { href: '#/runs/' + encodeURIComponent(r.run) }, h('code', { class: 'id' }, r.run)) : '') },
      { head: 'Server', cell: (r) => r.server || '' },
      { head: 'Tool or action', cell: (r) => (r.tool ? [h('code', {}, r.tool), r.changed ? h('div', { class: 'meta' }, r.changed.join(', ') + ' changed') : null] : r.action ? [r.action, r.target ? h('div', { class: 'meta' }, r.target) : null] : '') },
      { head: 'Outcome', cell: outcome },
      { head: 'Duration', cell: (r) => (typeof r.duration_ms === 'number' ? fmtSpan(r.duration_ms) : ''), secondary: true },
      { head: 'Approval', cell: (r) => (r.approval_id ? [h('code', { class: 'id' }, r.approval_id), r.decided_by ? h('div', { class: 'meta' }, 'by ' + r.decided_by) : null] : ''), secondary: true },
    ],
  });
}
