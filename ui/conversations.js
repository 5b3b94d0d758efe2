// The conversations pages: the searchable list, and one conversation as
// a chat, continued from its page or deleted (with a confirmation).
import { h, clear, api, afterPress, statusBadge, cutText, pretty, fmtAge, fmtTime, titleOf } from './dom.js';
import { errorNote } from './pages.js';
import { runView } from './run.js';
import { searchList, titleCell, startForm } from './runs.js';

export function conversationsPage(main, can, signal, params) {
  searchList(main, signal, {
    route: '/v1/conversations', field: 'conversations', hash: '#/conversations', noun: 'conversations', ms: 5000, params,
    empty: 'No conversations yet. Every run starts one; continue it from its page.',
    before: [h('h1', {}, 'Conversations')],
    columns: [
      { head: 'Conversation', cell: (c) => titleCell('#/conversations/' + encodeURIComponent(c.id), c) },
      { head: 'Status', cell: (c) => statusBadge(c.status) },
      { head: 'Owner', cell: (c) => c.owner || '—', secondary: true },
      { head: 'Runs', cell: (c) => String((c.runs || []).length) },
      { head: 'Updated', cell: (c) => fmtAge(c.updated_at) },
    ],
  });
}

export function conversationPage(main, can, signal, id) {
  const title = h('h1', { class: 'title' }, 'Conversation');
  const chat = h('div', { class: 'chat', 'aria-label': 'Conversation', 'aria-live': 'polite' });
  const live = h('div', {});
  const load = async () => {
    try {
      const c = await api('GET', `/v1/conversations/${encodeURIComponent(id)}`, undefined, signal);
      await afterPress();
      title.textContent = titleOf(c);
      clear(chat, h('p', { class: 'meta' }, `Owner ${c.owner || '—'} · ${c.runs.length} runs · updated ${fmtTime(c.updated_at)}`),
        (c.messages || []).map(bubble));
      const ended = ['completed', 'failed', 'cancelled'].includes(c.status);
      const active = !ended && c.runs.length ? c.runs[c.runs.length - 1] : null;
      if (active && !live.dataset.run) follow(active);
    } catch (err) { if (!signal.aborted) clear(chat, errorNote(err)); }
  };
  const follow = (runId) => {
    live.dataset.run = runId;
    clear(live, h('h2', {}, 'Now'), runView(runId, can, signal, () => { delete live.dataset.run; load(); }));
  };
  const form = can.write ? startForm(signal, id, (runId, body) => {
    chat.append(bubble({ role: 'user', content: body.prompt }));
    follow(runId);
  }) : null;
  clear(main, h('p', {}, h('a', { href: '#/conversations' }, '← Conversations')),
    h('div', { class: 'row' }, h('div', { class: 'grow' }, title, h('p', { class: 'meta' }, 'Conversation ', h('code', {}, id))),
      can.write ? deleteBox(id, signal) : null),
    chat, live, form);
  load();
}

// deleteBox is the conversation's Delete button; it asks for a
// confirmation in the page, then deletes the conversation (its runs the
// key sees, with their records and files) and goes back to the list.
function deleteBox(id, signal) {
  const box = h('div', { class: 'delete-box' });
  const status = h('p', { class: 'error', role: 'alert' });
  const ask = () => clear(box, h('button', { type: 'button', class: 'danger', onclick: confirm }, 'Delete'));
  const confirm = () => {
    clear(box, h('div', { class: 'card confirm', role: 'group', 'aria-label': 'Confirm the deletion' },
      h('p', {}, 'Delete this conversation and its runs, with their records and files? This cannot be undone.'),
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'danger', onclick: remove }, 'Delete for good'),
        h('button', { type: 'button', onclick: ask }, 'Keep it')), status));
    box.querySelector('button').focus();
  };
  const remove = async (e) => {
    e.target.disabled = true;
    try {
      await api('DELETE', `/v1/conversations/${encodeURIComponent(id)}`, undefined, signal);
      location.hash = '#/conversations';
    } catch (err) {
      if (signal.aborted) return;
      status.textContent = err.message;
      e.target.disabled = false;
    }
  };
  ask();
  return box;
}

function bubble(m) {
  if (m.role === 'tool') {
    return h('details', { class: 'tool' + (m.is_error ? ' is-error' : '') }, h('summary', {}, 'Tool result ', h('code', {}, m.name || m.tool_call_id || '')), cutText(m.content || ''));
  }
  const cls = m.role === 'user' ? 'user' : m.role === 'assistant' ? 'assistant-msg' : 'system';
  return h('div', { class: 'bubble ' + cls, 'aria-label': m.role },
    m.content || '', (m.tool_calls || []).map((tc) => h('details', { class: 'tool' }, h('summary', {}, 'Calls ', h('code', {}, tc.name)), cutText(pretty(tc.arguments ?? '{}')))));
}
