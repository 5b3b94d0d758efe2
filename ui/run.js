// The run page: the run's state, its events as a live timeline (the
// model's text as it streams, each tool call with its arguments and
// result, progress, sampling, usage), the questions and approvals it
// waits on, and cancel.
import { h, clear, titleOf, api, afterPress, followEvents, statusBadge, cutText, pretty, safeURL, fmtTime, fmtSpan, changeView } from './dom.js';
import { schemaForm } from './form.js';
import { RunChart } from './timeline.js';

const terminal = new Set(['completed', 'failed', 'cancelled']);
const isEnd = (ev) => ev.type === 'run.completed' || ev.type === 'run.failed' || ev.type === 'run.cancelled';

// runView renders run id into a new element and follows it until signal
// aborts. can says what the key may do; onEnd is called once the run ended.
export function runView(id, can, signal, onEnd) {
  const head = h('div', { class: 'card' }, 'Loading run…');
  const pending = h('div', { 'aria-live': 'polite' });
  const timeline = h('ol', { class: 'timeline', 'aria-label': 'Run events' });
  const final = h('div', { 'aria-live': 'polite' });
  const picture = h('div', { class: 'tl-figure' });
  const chart = new RunChart(picture, signal);
  const el = h('section', { 'aria-label': 'Run ' + id }, head,
    h('figure', { class: 'card tl' }, h('figcaption', { class: 'meta' }, 'Where the time went: model steps, tool calls, approvals and questions (hover or focus a bar for its figures)'), picture),
    pending, timeline, final);
  const view = new RunTimeline(id, can, timeline, pending);
  let run = null;

  const refresh = async () => {
    try {
      run = await api('GET', `/v1/runs/${encodeURIComponent(id)}`, undefined, signal);
      await afterPress();
    } catch (err) {
      if (!signal.aborted) clear(head, h('p', { class: 'error' }, err.message));
      return;
    }
    renderHead(head, run, can, signal, refresh);
    view.syncOpen(run);
    if (terminal.has(run.status)) renderFinal(final, run);
  };
  let refreshTimer = null;
  const soon = () => {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, 150);
  };
  refresh().then(() => followEvents(id, (ev) => { view.add(ev); chart.add(ev); if (view.changesState(ev)) soon(); }, signal, isEnd))
    .then(async () => { if (!signal.aborted) { await refresh(); if (onEnd) onEnd(run); } })
    .catch((err) => { if (!signal.aborted) final.append(h('p', { class: 'notice bad' }, 'Following the run stopped: ' + err.message)); });
  return el;
}

function renderHead(head, run, can, signal, refresh) {
  const u = run.usage || {};
  const tokens = (u.input_tokens || 0) + (u.output_tokens || 0);
  const items = [
    ['Status', statusBadge(run.status)],
    ['Model', run.model],
    ['Owner', run.owner || (run.owner === '' ? '—' : null)],
    ['Steps', String(run.steps)],
    ['Tool calls', String(run.tool_calls)],
    ['Tokens', tokens ? `${tokens.toLocaleString()} (${(u.input_tokens || 0).toLocaleString()} in, ${(u.output_tokens || 0).toLocaleString()} out)` : '0'],
    ['Cost', typeof u.cost_usd === 'number' ? '$' + u.cost_usd.toFixed(4) : null],
    ['Conversation', run.conversation_id ? h('a', { href: '#/conversations/' + encodeURIComponent(run.conversation_id) }, run.conversation_id) : null],
    ['Created', fmtTime(run.created_at)],
    ['Duration', run.started_at ? fmtSpan((run.ended_at ? new Date(run.ended_at) : new Date()) - new Date(run.started_at)) : null],
  ].filter(([, v]) => v !== null && v !== undefined && v !== '');
  const cancel = can.write && !terminal.has(run.status)
    ? h('button', { type: 'button', class: 'danger', onclick: async (e) => {
        e.target.disabled = true;
        try { await api('POST', `/v1/runs/${encodeURIComponent(run.id)}/cancel`, {}, signal); } catch (err) { alert(err.message); }
        refresh();
      } }, 'Cancel run')
    : null;
  // The head is drawn anew at each change of the run (once no press is
  // under way, see afterPress): the prompt stays open if the reader
  // opened it.
  const promptOpen = head.querySelector('details.prompt')?.open;
  clear(head,
    h('div', { class: 'row' }, h('h1', { class: 'grow title' }, titleOf(run)), cancel),
    h('p', { class: 'meta' }, 'Run ', h('code', {}, run.id)),
    h('dl', { class: 'grid' }, items.map(([k, v]) => h('div', {}, h('dt', { class: 'meta' }, k), h('dd', {}, v)))),
    h('details', { class: 'prompt', open: promptOpen }, h('summary', {}, 'Prompt'), cutText(run.prompt || '', 4000)));
}

function renderFinal(final, run) {
  const body = [];
  if (run.status === 'completed') body.push(h('h2', {}, 'Answer'), h('div', { class: 'output card' }, run.output || '(empty)'));
  if (run.error) body.push(h('h2', {}, 'Error'), h('p', { class: 'notice bad' }, run.error));
  clear(final, body);
}

// A RunTimeline turns events into timeline entries, keyed so that a
// replayed or repeated event updates its entry instead of adding one.
class RunTimeline {
  constructor(id, can, list, pending) {
    Object.assign(this, { id, can, list, pending });
    this.steps = new Map(); // step → the assistant text element
    this.calls = new Map(); // call_id → tool call entry
    this.questions = new Map(); // question or approval id → its card
  }

  changesState(ev) {
    return /^(model\.response|input\.|approval\.|run\.|budget\.)/.test(ev.type);
  }

  item(...children) {
    const li = h('li', {}, children);
    this.list.append(li);
    return li;
  }

  line(text, cls) { return this.item(h('div', { class: 'meta ' + (cls || '') }, text)); }

  add(ev) {
    const d = ev.data || {};
    switch (ev.type) {
      case 'run.started': return this.line(`Started with ${d.model || 'the model'}${d.max_steps ? `, at most ${d.max_steps} steps` : ''}.`);
      case 'profile.missing': return this.line(d.message || 'The profile was not found.', 'error');
      case 'mcp.server.connected': return this.line(`Server ${d.server} connected (${d.tools} tools, ${d.source}).`);
      case 'mcp.server.failed': return this.line(`Server ${d.server} failed: ${d.error}`, 'error');
      case 'mcp.servers.waiting': return this.line(`Waiting for ${(d.servers || []).join(', ')} to finish starting.`);
      case 'mcp.servers.waited': return this.line(`Waited ${Math.round(d.duration_ms || 0)} ms: ${(d.servers || []).map((s) =>
        s.status === 'ready' ? `${s.server} ready (${s.tools} tools)` : `${s.server} ${s.status}${s.error ? `: ${s.error}` : ''}`).join('; ')}.`);
      case 'model.delta': return this.delta(d);
      case 'model.retry': return this.retry(d);
      case 'model.response': return this.response(d);
      case 'tool.call.started': return this.callStarted(d);
      case 'tool.call.progress': return this.progress(d);
      case 'tool.call.completed': return this.callCompleted(d);
      case 'input.requested': return this.question(d);
      case 'input.answered': return this.closeQuestion(d.id, `Answered: ${d.action}${d.by ? ` (by ${d.by})` : ''}.`);
      case 'input.completed': return this.line(`Server ${d.server} says the URL question ${d.elicitation_id} is complete.`);
      case 'sampling.requested': return this.line(`Server ${d.server} asked the model (${d.model}) for a completion.`);
      case 'sampling.completed': return this.line(d.error ? `Sampling for ${d.server} failed: ${d.error}` : `Sampling for ${d.server} done (${usageText(d.usage)}).`, d.error ? 'error' : '');
      case 'sampling.refused': return this.line(`Sampling for ${d.server} refused: ${d.reason}`, 'error');
      case 'approval.requested': return this.approval(d);
      case 'approval.resolved': return this.decided(d);
      case 'budget.exceeded': return this.line(`Budget exceeded: ${d.budget || ''} ${d.message || ''}`.trim(), 'error');
      case 'mcp.tool.changed': return this.item(h('div', { class: 'meta ' + (d.pin_tools === 'hold' ? 'error' : '') },
        `Server ${d.server} changed the definition of ${d.name}: ${d.pin_tools === 'hold'
          ? 'it is held, not offered until an admin accepts the change.' : 'going on with the new one (pin_tools = "warn").'}`), changeView(d));
      case 'conversation.trimmed': return this.line(`The conversation was trimmed to fit: ${d.message || JSON.stringify(d)}`);
      default:
        if (ev.type && ev.type.startsWith('run.')) return this.line(`Run ${ev.type.slice(4)}.`);
        return this.line(`${ev.type}: ${JSON.stringify(d)}`);
    }
  }

  stepText(step) {
    let el = this.steps.get(step);
    if (!el) {
      el = h('div', { class: 'assistant live', 'aria-label': 'Model, step ' + step });
      this.steps.set(step, el);
      this.item(h('div', { class: 'meta' }, `Model, step ${step}`), el);
    }
    return el;
  }

  delta(d) { const el = this.stepText(d.step); el.append(document.createTextNode(d.text || '')); }

  retry(d) {
    const el = this.steps.get(d.step);
    if (el) el.textContent = '';
    this.line(`The model call of step ${d.step} failed${d.error ? ` (${d.error})` : ''} and is retried.`, 'error');
  }

  response(d) {
    const el = this.stepText(d.step);
    el.classList.remove('live');
    el.textContent = d.content || '';
    if (!d.content) el.append(h('span', { class: 'meta' }, d.tool_calls && d.tool_calls.length ? `(calls ${d.tool_calls.join(', ')})` : '(no text)'));
    el.after(h('div', { class: 'meta' }, usageText(d.usage)));
  }

  callStarted(d) {
    const progress = h('span', {});
    const result = h('div', {}, h('span', { class: 'meta' }, 'Running…'));
    const summary = h('summary', {}, h('code', {}, d.name), ' ', progress);
    const det = h('details', { class: 'tool' }, summary,
      h('div', { class: 'meta' }, 'Arguments'), cutText(pretty(d.arguments ?? '{}')), result);
    const li = this.item(det);
    this.calls.set(d.call_id, { det, progress, result, summary, li, name: d.name, args: pretty(d.arguments ?? '{}') });
  }

  progress(d) {
    const c = this.calls.get(d.call_id);
    if (!c) return;
    const attrs = { value: d.progress, 'aria-label': 'Progress' };
    if (d.total) attrs.max = d.total;
    clear(c.progress, h('progress', attrs), ' ', d.message || (d.total ? `${d.progress}/${d.total}` : String(d.progress)));
  }

  callCompleted(d) {
    let c = this.calls.get(d.call_id);
    if (!c) { this.callStarted(d); c = this.calls.get(d.call_id); }
    clear(c.progress, h('span', { class: 'meta' }, `${d.is_error ? 'error' : 'ok'}, ${fmtSpan(d.duration_ms)}`));
    if (d.is_error) c.det.classList.add('is-error');
    clear(c.result, h('div', { class: 'meta' }, d.is_error ? 'Error' : 'Result'), cutText(d.result ?? ''));
  }

  question(d) {
    if (!d.id) return this.line(`Server ${d.server} asked: ${d.message} — ${d.action}${d.reason ? ` (${d.reason})` : ''}.`);
    if (this.questions.has(d.id)) return;
    const card = h('div', { class: 'card question', role: 'group', 'aria-label': 'Question from ' + d.server });
    this.questions.set(d.id, card);
    card.append(h('div', { class: 'meta' }, `Question from ${d.server}`), h('p', {}, d.message || ''));
    if (!this.can.write) card.append(h('p', { class: 'meta' }, 'Waiting for an answer (this key may not answer).'));
    else if (d.mode === 'url') this.urlQuestion(card, d);
    else this.formQuestion(card, d);
    this.pending.append(card);
  }

  formQuestion(card, d) {
    const form = schemaForm(d.requested_schema || {}, 'q-' + d.id.replace(/[^A-Za-z0-9_-]/g, ''));
    const status = h('div', { class: 'field-error', 'aria-live': 'polite' });
    const send = (action) => async (e) => {
      e.preventDefault();
      let content;
      if (action === 'accept') {
        const r = form.read();
        if (!r.ok) { status.textContent = 'Fix the fields above.'; return; }
        content = r.content;
      }
      await this.answer(`/v1/runs/${encodeURIComponent(this.id)}/input/${encodeURIComponent(d.id)}`, content ? { action, content } : { action }, card, status);
    };
    card.append(h('form', { onsubmit: send('accept'), novalidate: true }, form.el,
      h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, 'Send'),
        h('button', { type: 'button', onclick: send('decline') }, 'Decline'),
        h('button', { type: 'button', onclick: send('cancel') }, 'Cancel')), status));
  }

  urlQuestion(card, d) {
    const url = safeURL(d.url);
    const status = h('div', { class: 'field-error', 'aria-live': 'polite' });
    const path = `/v1/runs/${encodeURIComponent(this.id)}/input/${encodeURIComponent(d.id)}`;
    card.append(
      url ? h('p', {}, h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, 'Open ', url)) : h('p', { class: 'error' }, 'The server sent a URL that is not http(s): ' + d.url),
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'primary', onclick: () => this.answer(path, { action: 'accept' }, card, status) }, 'I opened it'),
        h('button', { type: 'button', onclick: () => this.answer(path, { action: 'decline' }, card, status) }, 'Decline')), status);
  }

  // approval shows a call waiting for a decision in the timeline, next
  // to the call it gates (the latest call of that tool without one), or
  // at the top while that call is not shown yet (a page opened while the
  // run waits shows the open approvals before the replay reaches them).
  // Decided, it stays where it is (decided).
  approval(d) {
    const known = this.questions.get(d.approval_id);
    if (known) {
      if (known.parentNode === this.pending) this.place(known, d);
      return;
    }
    const card = h('div', { class: 'card question approval', role: 'group', 'aria-label': 'Approval for ' + d.tool });
    this.questions.set(d.approval_id, card);
    card.append(h('div', { class: 'meta approval-head' }, `Approval needed: ${d.server} wants to run ${d.server_tool || d.tool}`),
      h('p', {}, h('code', {}, d.tool)), cutText(pretty(d.arguments ?? '{}')));
    if (d.annotations && Object.keys(d.annotations).length) card.append(h('div', { class: 'meta' }, 'Annotations: ' + JSON.stringify(d.annotations)));
    if (!this.can.write) {
      card.append(h('p', { class: 'meta decide' }, 'Waiting for a decision (this key may not decide).'));
    } else {
      const rid = 'reason-' + d.approval_id.replace(/[^A-Za-z0-9_-]/g, '');
      const reason = h('input', { type: 'text', id: rid });
      const status = h('div', { class: 'field-error', 'aria-live': 'polite' });
      const path = `/v1/runs/${encodeURIComponent(this.id)}/approvals/${encodeURIComponent(d.approval_id)}`;
      const decide = (decision) => () => {
        const body = { decision };
        if (reason.value.trim()) body.reason = reason.value.trim();
        return this.answer(path, body, card, status);
      };
      card.append(h('div', { class: 'decide' }, h('label', { for: rid }, 'Reason ', h('span', { class: 'hint' }, '(optional, told to the model when denied)')), reason,
        h('div', { class: 'row' }, h('button', { type: 'button', class: 'primary', onclick: decide('approve') }, 'Approve'),
          h('button', { type: 'button', class: 'danger', onclick: decide('deny') }, 'Deny')), status));
    }
    this.place(card, d);
  }

  // place puts an approval card after the call it gates (of the same tool,
  // with the same arguments when one has them), else at the top.
  place(card, d) {
    const calls = [...this.calls.values()].filter((c) => c.name === d.tool && !c.approval);
    const args = pretty(d.arguments ?? '{}');
    const call = calls.findLast((c) => c.args === args) || calls[calls.length - 1];
    if (!call) { this.pending.append(card); return; }
    call.approval = card;
    call.li.append(card);
  }

  // decided marks an approval's card decided where it stands: who decided
  // what, and the reason given, as text.
  decided(d) {
    const verdict = d.decision === 'approve' ? 'Approved' : 'Denied';
    const text = `${verdict} by ${d.by}.`;
    const card = this.questions.get(d.approval_id);
    if (!card) return this.line(text + (d.reason ? ` Reason: ${d.reason}` : ''));
    card.classList.remove('question');
    card.classList.add('decided', d.decision === 'approve' ? 'approved' : 'denied');
    card.setAttribute('aria-label', `${verdict}: ${card.getAttribute('aria-label').replace(/^Approval for /, '')}`);
    const head = card.querySelector('.approval-head');
    if (head) head.textContent = head.textContent.replace(/^Approval needed: (\S+) wants to run/, `${verdict} call: $1 wanted to run`);
    const outcome = h('div', { class: 'verdict' }, h('p', {}, h('strong', {}, text)),
      d.reason ? h('p', {}, 'Reason: ', h('span', { class: 'reason' }, d.reason)) : null);
    const decide = card.querySelector('.decide');
    if (decide) decide.replaceWith(outcome);
    else card.append(outcome);
  }

  async answer(path, body, card, status) {
    const buttons = card.querySelectorAll('button');
    buttons.forEach((b) => { b.disabled = true; });
    try {
      await api('POST', path, body);
      status.textContent = '';
    } catch (err) {
      status.textContent = err.message;
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  closeQuestion(id, text) {
    const card = this.questions.get(id);
    if (!card) return this.line(text);
    card.querySelectorAll('button, input, select, textarea').forEach((el) => { el.disabled = true; });
    const form = card.querySelector('form');
    if (form) form.replaceWith(h('p', { class: 'meta' }, text));
    else card.append(h('p', { class: 'meta' }, text));
    card.classList.remove('question');
    this.item(card); // answered: it moves from the top into the timeline
  }

  // Open questions and approvals wait at the top, above the timeline.
  // syncOpen shows questions the view lists as open but no event showed
  // (a page opened after they were asked and before a replay reached them).
  syncOpen(run) {
    for (const q of run.input_requests || []) this.question(q);
    for (const a of run.approvals || []) this.approval(a);
  }
}

function usageText(u) {
  if (!u) return '';
  return `${(u.input_tokens || 0).toLocaleString()} tokens in, ${(u.output_tokens || 0).toLocaleString()} out`;
}
