// A run's timeline as a picture: an SVG Gantt chart drawn from the run's
// events on one time axis. Each bar stands for one pair of events:
//   model    the model call of a step: from the event before it (the run's
//            start, the step's last tool result) to its model.response;
//            its latency, tokens and cost in the label and tooltip
//   tool     tool.call.started → tool.call.completed (call_id)
//   approval approval.requested → approval.resolved (approval_id)
//   question input.requested → input.answered (id); a question declined
//            at once is one event and a bar of no length
// A bar whose closing event has not come yet is open (data-open): it grows
// up to now while the run goes. A model call under way, which has no
// event of its own until it answers, is drawn open once nothing else is.

const svgNS = 'http://www.w3.org/2000/svg';

// s builds an SVG element with attributes and children (strings as text).
function s(tag, attrs, ...children) {
  const el = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) el.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// span formats milliseconds for the chart: 0.35 s below a minute keeps
// a decimal below 10 s, so a fast call does not read 0 s.
export function span(ms) {
  if (!(ms >= 0) || !isFinite(ms)) return '';
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 10000) return (ms / 1000).toFixed(1) + ' s';
  if (ms < 90000) return Math.round(ms / 1000) + ' s';
  if (ms < 5400000) return Math.round(ms / 60000) + ' min';
  return (ms / 3600000).toFixed(1) + ' h';
}

function usageLabel(u) {
  if (!u) return '';
  const parts = [`${((u.input_tokens || 0) + (u.output_tokens || 0)).toLocaleString()} tokens`];
  if (typeof u.cost_usd === 'number' && u.cost_usd > 0) parts.push('$' + u.cost_usd.toFixed(4));
  return parts.join(', ');
}

// Event types that are not history (live only) and mark no moment of the
// run's own progress.
const liveOnly = new Set(['model.delta', 'tool.call.progress', 'model.retry']);

const rowH = 26;
const axisH = 22;

// A RunChart keeps the bars of one run and draws them into el (a
// container it fills with one <svg>), again at each event and, while the
// run goes and a bar is open, every half second until signal aborts.
export class RunChart {
  constructor(el, signal) {
    this.el = el;
    this.signal = signal;
    this.bars = new Map(); // key → bar
    this.order = 0;
    this.t0 = null; // the run's first event
    this.end = null; // its terminal event, once it came
    this.mark = null; // the latest history event: where a model call starts
    this.step = 0; // the last step the model answered
    this.started = false; // run.started came (a model call may be under way)
    this.firstText = new Map(); // step → when its first text arrived (live)
    this.pending = false;
    this.timer = null;
    // Drawn again for a new window width; a scrollbar that comes or goes
    // after a draw only scales the picture (app.css: .tl-chart), which
    // keeps every label inside it.
    const onResize = () => this.draw();
    addEventListener('resize', onResize);
    signal.addEventListener('abort', () => { removeEventListener('resize', onResize); this.stopTimer(); });
  }

  bar(key, kind, start) {
    let b = this.bars.get(key);
    if (!b) {
      b = { key, kind, start, end: null, order: this.order++, label: '', detail: '' };
      this.bars.set(key, b);
    }
    return b;
  }

  // add takes one event of the run (replayed or live) and redraws soon.
  add(ev) {
    const t = Date.parse(ev.time);
    if (!isFinite(t)) return;
    const d = ev.data || {};
    if (this.t0 === null || t < this.t0) this.t0 = t;
    switch (ev.type) {
      case 'run.started': this.started = true; break;
      case 'model.delta':
        if (!this.firstText.has(d.step)) this.firstText.set(d.step, t);
        break;
      case 'model.response': {
        const b = this.bar('model:' + d.step, 'model', this.mark ?? t);
        b.end = t;
        const latency = t - b.start;
        const first = this.firstText.get(d.step);
        b.label = `model, step ${d.step} · ${span(latency)}${d.usage ? ' · ' + usageLabel(d.usage) : ''}`;
        b.detail = `Model step ${d.step}: ${span(latency)} latency` +
          (first !== undefined ? ` (first text after ${span(first - b.start)})` : '') +
          (d.usage ? `; ${(d.usage.input_tokens || 0).toLocaleString()} tokens in, ${(d.usage.output_tokens || 0).toLocaleString()} out` +
            (typeof d.usage.cost_usd === 'number' ? `, $${d.usage.cost_usd.toFixed(4)}` : '') : '') +
          (d.tool_calls && d.tool_calls.length ? `; calls ${d.tool_calls.join(', ')}` : '');
        this.step = Math.max(this.step, d.step || 0);
        break;
      }
      case 'tool.call.started': {
        const b = this.bar('tool:' + d.call_id, 'tool', t);
        b.name = d.name;
        b.label = `${d.name} · running`;
        b.detail = `Tool call ${d.name} (step ${d.step}), running`;
        break;
      }
      case 'tool.call.completed': {
        const ms = typeof d.duration_ms === 'number' ? d.duration_ms : 0;
        const b = this.bar('tool:' + d.call_id, 'tool', t - ms);
        b.end = t;
        b.error = !!d.is_error;
        b.label = `${d.name} · ${span(ms)}${d.is_error ? ' · error' : ''}`;
        b.detail = `Tool call ${d.name} (step ${d.step}): ${span(ms)}, ${d.is_error ? 'error' : 'ok'}`;
        break;
      }
      case 'approval.requested': {
        const b = this.bar('approval:' + d.approval_id, 'approval', t);
        b.name = d.tool;
        b.label = `approval of ${d.tool} · waiting`;
        b.detail = `Approval of ${d.tool} (${d.server}), waiting for a decision`;
        break;
      }
      case 'approval.resolved': {
        const b = this.bar('approval:' + d.approval_id, 'approval', t);
        b.end = t;
        const what = d.decision === 'approve' ? 'approved' : 'denied';
        b.label = `approval of ${b.name || 'a call'} · ${what} by ${d.by} · ${span(t - b.start)}`;
        b.detail = `Approval of ${b.name || 'a call'}: ${what} by ${d.by} after ${span(t - b.start)}${d.reason ? ` (${d.reason})` : ''}`;
        break;
      }
      case 'input.requested': {
        const b = this.bar('question:' + (d.id || 'seq' + ev.seq), 'question', t);
        b.label = `question from ${d.server} · ${d.id ? 'waiting' : d.action}`;
        b.detail = `Question from ${d.server}: ${d.message || ''}`;
        b.server = d.server;
        if (!d.id) { b.end = t; b.detail += ` — ${d.action}${d.reason ? ` (${d.reason})` : ''}`; }
        break;
      }
      case 'input.answered': {
        const b = this.bar('question:' + d.id, 'question', t);
        b.end = t;
        b.label = `question from ${b.server || d.server} · ${d.action} · ${span(t - b.start)}`;
        b.detail += ` — ${d.action}${d.by ? ` by ${d.by}` : ''} after ${span(t - b.start)}`;
        break;
      }
      default:
        if (ev.type === 'run.completed' || ev.type === 'run.failed' || ev.type === 'run.cancelled') this.end = t;
    }
    if (!liveOnly.has(ev.type)) this.mark = t;
    this.soon();
  }

  // soon draws once after the events of this task.
  soon() {
    if (this.pending) return;
    this.pending = true;
    queueMicrotask(() => { this.pending = false; this.draw(); });
  }

  stopTimer() { if (this.timer) { clearInterval(this.timer); this.timer = null; } }

  // underWay returns the open model call, drawn while the run goes and
  // nothing else is open: the step after the last answered one.
  underWay() {
    if (this.end !== null || !this.started || this.mark === null) return null;
    for (const b of this.bars.values()) if (b.end === null) return null;
    const step = this.step + 1;
    return { key: 'model:' + step, kind: 'model', start: this.mark, end: null, order: this.order,
      label: `model, step ${step} · answering`, detail: `Model step ${step}: waiting for the model's answer` };
  }

  draw() {
    if (this.signal.aborted) return;
    const bars = [...this.bars.values()];
    const open = this.underWay();
    if (open) bars.push(open);
    bars.sort((a, b) => a.start - b.start || a.order - b.order);
    const live = this.end === null;
    const now = live ? Math.max(Date.now(), this.mark ?? 0) : this.end;
    if (live && bars.some((b) => b.end === null)) {
      if (!this.timer) this.timer = setInterval(() => this.draw(), 500);
    } else this.stopTimer();
    const t0 = this.t0 ?? now;
    const total = Math.max(now - t0, 1);
    const W = Math.max(this.el.clientWidth || 0, 240);
    const H = axisH + bars.length * rowH + 4;
    const x = (t) => ((t - t0) / total) * (W - 2) + 1;
    const counts = {};
    for (const b of bars) counts[b.kind] = (counts[b.kind] || 0) + 1;
    const summary = `Timeline: ${counts.model || 0} model steps, ${counts.tool || 0} tool calls, ${counts.approval || 0} approvals, ` +
      `${counts.question || 0} questions over ${span(total)}${live ? ', still going' : ''}`;
    const svg = s('svg', { class: 'tl-chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': summary },
      s('title', {}, summary));
    svg.append(this.axis(t0, total, W, H, x));
    bars.forEach((b, i) => {
      const end = b.end ?? now;
      const x0 = x(b.start);
      const w = Math.max(x(end) - x0, 2);
      const y = axisH + i * rowH;
      const ms = Math.max(end - b.start, 0);
      const label = b.end === null ? b.label + ' ' + span(ms) : b.label;
      const text = s('text', { class: 'tl-label', x: x0, y: y + 10 }, label);
      const g = s('g', { class: `tl-bar tl-${b.kind}${b.error ? ' tl-error' : ''}${b.end === null ? ' tl-open' : ''}`,
        'data-kind': b.kind, 'data-key': b.key, 'data-ms': Math.round(ms), 'data-open': b.end === null ? '' : null, tabindex: 0 },
      s('title', {}, b.end === null ? `${b.detail} (${span(ms)} so far)` : b.detail),
      s('rect', { x: x0, y: y + 13, width: w, height: 10, rx: 2 }), text);
      svg.append(g);
    });
    this.el.replaceChildren(svg);
    // Keep each label inside the picture: move it left when it would
    // run out on the right. A chart not laid out yet measures no text:
    // its labels are taken at an 11px font's widest average.
    for (const t of svg.querySelectorAll('text.tl-label')) {
      let len = 0;
      try { len = t.getComputedTextLength(); } catch { len = 0; }
      if (!len) len = t.textContent.length * 7;
      const x0 = Number(t.getAttribute('x'));
      if (x0 + len > W - 2) t.setAttribute('x', Math.max(1, W - 2 - len));
    }
  }

  // axis draws the time axis: a tick every 1, 2 or 5 units, about one
  // per 80 pixels, with a faint line down the chart.
  axis(t0, total, W, H, x) {
    const g = s('g', { class: 'tl-axis', 'aria-hidden': 'true' });
    const want = total / Math.max(Math.floor(W / 80), 1);
    const steps = [1, 10, 100, 1000, 10000, 60000, 600000, 3600000].flatMap((unit) => [unit, unit * 2, unit * 5]);
    const step = steps.find((st) => st >= want) ?? want;
    for (let t = 0; t <= total; t += step) {
      const px = x(t0 + t);
      g.append(s('line', { x1: px, x2: px, y1: axisH - 6, y2: H }),
        s('text', { x: px, y: 11, 'text-anchor': t === 0 ? 'start' : px > W - 30 ? 'end' : 'middle' }, t === 0 ? '0' : span(t)));
    }
    return g;
  }
}
