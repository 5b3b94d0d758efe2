// Browser scenarios of the console, run by TestConsoleInBrowser (api_console_browser_test.go)
// against a live harnessd with the scripted model and server-everything:
//   node --test testdata/console/console.test.mjs
// Environment: NODE_MODULES (testdata/npm/node_modules), CONSOLE_URL, GATE_URL (lets the
// scripted model finish its streamed first answer), ADMIN_KEY, WRITE_KEY, READ_KEY, CHROMIUM (the browser),
// ARTIFACTS (where a failed scenario leaves its screenshot and console log),
// EVERYTHING_SERVER (server-everything as a run's own server, JSON), and
// SCREENSHOTS (optional: where each page's screenshot for the README goes).
import assert from 'node:assert/strict';
import { env, base, scenario, shot, signIn, api } from './browser.mjs';

const keys = { admin: env('ADMIN_KEY'), write: env('WRITE_KEY'), read: env('READ_KEY') };

// startRun fills the start form and waits for the run's page.
async function startRun(page, prompt, opts = {}) {
  await page.getByLabel('Prompt', { exact: true }).fill(prompt);
  if (opts.interactive === false) await page.getByLabel(/Interactive/).uncheck();
  await page.getByRole('button', { name: 'Start run' }).click();
  await page.waitForURL(/#\/runs\/[^/]+$/);
  return decodeURIComponent(page.url().split('#/runs/')[1]);
}

const answer = (page) => page.locator('.output');

const ended = (events) => events.some((e) => /^run\.(completed|failed|cancelled)$/.test(e.type));

// runEvents reads a run's events (GET /v1/runs/{id}/events) until until
// (events) holds: by default, up to the run's terminal event.
async function runEvents(id, key, until = ended) {
  const ctl = new AbortController();
  const res = await fetch(`${base}/v1/runs/${id}/events`, { headers: { Authorization: 'Bearer ' + key, Accept: 'text/event-stream' }, signal: ctl.signal });
  assert.equal(res.status, 200);
  const events = [];
  const decoder = new TextDecoder();
  let buf = '';
  const reader = res.body.getReader();
  const deadline = setTimeout(() => ctl.abort(), 30000); // bounds a failure only
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = frame.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
        if (data) events.push(JSON.parse(data));
      }
      if (until(events)) return events;
    }
  } finally {
    clearTimeout(deadline);
    ctl.abort();
  }
  throw new Error(`the events of run ${id} ended before the awaited one: ${events.map((e) => e.type).join(', ')}`);
}

// expectedBars counts the bars a run's timeline draws for its events, by
// kind: a model step per model.response, a tool call per call_id, an
// approval per approval_id, a question per input.requested; and how many
// of them wait for their closing event.
function expectedBars(events) {
  const keys = { model: new Set(), tool: new Set(), approval: new Set(), question: new Set() };
  const closed = new Set();
  for (const e of events) {
    const d = e.data || {};
    switch (e.type) {
      case 'model.response': keys.model.add('model:' + d.step); closed.add('model:' + d.step); break;
      case 'tool.call.started': keys.tool.add('tool:' + d.call_id); break;
      case 'tool.call.completed': keys.tool.add('tool:' + d.call_id); closed.add('tool:' + d.call_id); break;
      case 'approval.requested': keys.approval.add('approval:' + d.approval_id); break;
      case 'approval.resolved': closed.add('approval:' + d.approval_id); break;
      case 'input.requested': {
        const k = 'question:' + (d.id || 'seq' + e.seq);
        keys.question.add(k);
        if (!d.id) closed.add(k);
        break;
      }
      case 'input.answered': closed.add('question:' + d.id); break;
    }
  }
  const all = Object.values(keys).flatMap((s) => [...s]);
  return { model: keys.model.size, tool: keys.tool.size, approval: keys.approval.size, question: keys.question.size,
    open: all.filter((k) => !closed.has(k)).length };
}

// drawnBars counts the timeline's bars in the page the same way.
function drawnBars(page) {
  return page.evaluate(() => {
    const bars = [...document.querySelectorAll('svg.tl-chart g.tl-bar')];
    const n = (kind) => bars.filter((b) => b.dataset.kind === kind).length;
    return { model: n('model'), tool: n('tool'), approval: n('approval'), question: n('question'), open: bars.filter((b) => b.hasAttribute('data-open')).length };
  });
}

// waitForBars polls the page until its timeline draws want, failing with
// what it drew last when the page's wait runs out.
async function waitForBars(page, want, what) {
  await page.waitForFunction((w) => {
    const bars = [...document.querySelectorAll('svg.tl-chart g.tl-bar')];
    const n = (kind) => bars.filter((b) => b.dataset.kind === kind).length;
    return n('model') === w.model && n('tool') === w.tool && n('approval') === w.approval && n('question') === w.question &&
      bars.filter((b) => b.hasAttribute('data-open')).length === w.open;
  }, want, { timeout: 20000 }).catch(async (err) => {
    throw new Error(`${what}: the timeline draws ${JSON.stringify(await drawnBars(page))}, want ${JSON.stringify(want)} (${err.message})`);
  });
}

// assertFits fails when the page scrolls sideways or an element of it
// reaches past the screen's right edge (in a box that scrolls).
async function assertFits(page, what) {
  const widths = await page.evaluate(() => ({
    page: document.documentElement.scrollWidth,
    screen: window.innerWidth,
    wide: [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 || e.scrollWidth > window.innerWidth)
      .map((e) => `${e.tagName}.${e.getAttribute('class') || ''} (${Math.round(e.getBoundingClientRect().right)}px)`),
  }));
  assert.ok(widths.page <= widths.screen, `${what} is ${widths.page}px wide on a ${widths.screen}px screen: ${widths.wide.join(', ')}`);
  assert.deepEqual(widths.wide, [], `${what}: elements reaching past the screen's right edge`);
}

// middleOf returns the middle of the first element matching selector, and
// its href, once it is drawn. It is read in one step of the page's script:
// the page may draw the element anew (a refresh of the run or the list)
// between two steps of a locator, whose boundingBox is then null.
async function middleOf(page, selector) {
  const at = await page.waitForFunction((sel) => {
    const e = document.querySelector(sel);
    const r = e && e.getBoundingClientRect();
    return r && r.width > 0 && r.height > 0 && { x: r.x + r.width / 2, y: r.y + r.height / 2, href: e.getAttribute('href') };
  }, selector, { polling: 100 });
  return at.jsonValue();
}

// runsWith returns the ids of the runs whose prompt holds word.
async function runsWith(word, key) {
  const list = await api('GET', '/v1/runs', key);
  const ids = [];
  for (const r of list.body.runs) {
    const v = await api('GET', `/v1/runs/${r.id}`, key);
    if (v.body.prompt.toLowerCase().includes(word.toLowerCase())) ids.push(r.id);
  }
  return { ids, total: list.body.runs.length };
}

scenario('a wrong key is told so; a runs:read key is offered no start button', async (page) => {
  await page.goto(base + '/');
  await page.waitForURL(/\/ui\/#?/);
  await shot(page, 'login.png');
  await page.getByLabel('Key').fill('not-a-key');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'That key was refused' }).waitFor();
  const url = page.url();
  assert.ok(!url.includes('not-a-key'), 'the key never goes into a URL');
  await page.getByLabel('Key').fill(keys.read);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Runs' }).waitFor();
  assert.equal(await page.getByRole('button', { name: 'Start run' }).count(), 0, 'no start button for runs:read');
  assert.equal(await page.getByRole('link', { name: 'Schedules' }).isVisible(), false, 'no schedules for runs:read');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('harnessd.key')), keys.read);
  assert.equal(await page.evaluate(() => localStorage.length), 0, 'nothing in localStorage');
});

scenario('the servers page lists server-everything\'s tools', async (page) => {
  await signIn(page, keys.admin, '#/servers');
  const card = page.locator('.card').filter({ has: page.getByRole('heading', { name: 'everything' }) });
  await card.locator('.status-ready').waitFor();
  await card.getByText(/\d+ tools/).click();
  for (const tool of ['echo', 'get_sum', 'trigger_elicitation_request']) {
    await card.locator('code', { hasText: new RegExp(`^mcp_everything_${tool}$`) }).waitFor();
  }
  await card.getByText('Input schema').first().click();
  await shot(page, 'servers.png');
});

scenario('a run started from the form shows its tool call and answer', async (page) => {
  await signIn(page, keys.write);
  await shot(page, 'runs.png');
  const id = await startRun(page, 'Echo hello console through the everything server');
  // The model's first piece shows while its answer is still streaming;
  // then the fake model is let go on.
  await page.locator('.assistant.live').filter({ hasText: 'Calling' }).waitFor();
  await fetch(env('GATE_URL'));
  await page.locator('.assistant').filter({ hasText: 'Calling echo now.' }).waitFor();
  const call = page.locator('details.tool').filter({ hasText: 'mcp_everything_echo' });
  await call.waitFor();
  await call.locator('summary').click();
  await call.getByText('"message": "hello console"').waitFor();
  await call.getByText('Echo: hello console').waitFor();
  await answer(page).filter({ hasText: 'The server said: Echo: hello console' }).waitFor();
  await page.locator('.status-completed').first().waitFor();
  await shot(page, 'run.png');
  await page.getByRole('link', { name: '← Runs' }).click();
  await page.getByRole('link', { name: id }).waitFor();
});

scenario('an elicitation form refuses a wrong value, then sends the answer', async (page) => {
  await signIn(page, keys.write);
  const id = await startRun(page, 'Ask me for my details');
  const question = page.getByRole('group', { name: 'Question from everything' });
  await question.waitFor();
  await question.getByLabel(/^String\b/).first().fill('Ada Lovelace');
  await question.getByLabel(/^Integer/).fill('500');
  await question.getByRole('button', { name: 'Send' }).click();
  await question.getByText('Integer must be at most 100').waitFor();
  const open = await api('GET', `/v1/runs/${id}`, keys.write);
  assert.equal(open.body.input_requests.length, 1, 'the refused value was not sent');
  await shot(page, 'question.png');
  await question.getByLabel(/^Integer/).fill('7');
  await question.getByRole('button', { name: 'Send' }).click();
  await answer(page).filter({ hasText: 'Name: Ada Lovelace' }).waitFor();
  await page.getByText(/Answered: accept/).waitFor();
});

scenario('a prompt and a tool result with markup show as text and run nothing', async (page) => {
  const payload = '<img src=x onerror=alert(1)></script><script>alert(2)</script>';
  await signIn(page, keys.write);
  await startRun(page, 'Echo this: ' + payload);
  await answer(page).filter({ hasText: 'Result: Echo: <img src=x onerror=alert(1)>' }).waitFor();
  const call = page.locator('details.tool').filter({ hasText: 'mcp_everything_echo' });
  await call.locator('summary').click();
  await call.locator('pre').filter({ hasText: 'Echo: <img src=x onerror=alert(1)></script>' }).waitFor();
  await page.getByText('Prompt', { exact: true }).click();
  await page.locator('pre').filter({ hasText: payload }).first().waitFor();
  assert.equal(await page.locator('main img').count(), 0, 'no element made from the text');
  assert.equal(await page.locator('main script').count(), 0, 'no script made from the text');
});

scenario('a call waiting for approval is approved, the next denied with a reason', async (page) => {
  await signIn(page, keys.write);
  await startRun(page, 'Add with approval');
  const open = () => page.locator('.card.question').filter({ hasText: 'Approval needed' });
  await open().waitFor();
  await open().getByText('"a": 1').waitFor();
  await page.locator('.status-waiting_approval').first().waitFor();
  await shot(page, 'approval.png');
  await open().getByRole('button', { name: 'Approve' }).click();
  await open().getByText('"a": 3').waitFor();
  await open().getByLabel(/Reason/).fill('not now');
  await open().getByRole('button', { name: 'Deny' }).click();
  await answer(page).filter({ hasText: 'the operator denied this call: not now' }).waitFor();
  await page.getByText(/Approved by writer/).waitFor();
  await page.getByText(/Denied by writer/).waitFor();
  // Decided, each card stays by the call it gated, says so, and shows the
  // reason as text.
  const denied = page.locator('.approval.decided.denied');
  await denied.getByText('Reason: not now').waitFor();
  assert.equal(await denied.getByRole('textbox').count(), 0, 'no field left in a decided card');
  assert.equal(await page.getByText('Approval needed').count(), 0, 'no decided card says approval is needed');
  const placed = await page.evaluate(() => [...document.querySelectorAll('.approval.decided')].map((c) =>
    c.parentElement.matches('ol.timeline > li') && c.previousElementSibling.matches('details.tool') &&
    c.previousElementSibling.textContent.includes('mcp_everything_get_sum')));
  assert.deepEqual(placed, [true, true], 'each decided card sits by its call');
});

scenario('a click on the prompt is kept while the run changes under it', async (page) => {
  // The run changes between the press on the prompt's summary and its
  // release: the page has the changed run before the release, and draws
  // it only after, without losing the click.
  await signIn(page, keys.write);
  const id = await startRun(page, 'Add while the prompt is clicked');
  await page.locator('.card.question').filter({ hasText: 'Approval needed' }).waitFor();
  const toolCalls = page.locator('dt', { hasText: 'Tool calls' }).locator('xpath=following-sibling::dd');
  await toolCalls.filter({ hasText: /^0$/ }).waitFor();
  // The head is drawn anew at each change of the run: the last before the
  // press is the one that says the run waits.
  await page.locator('.status-waiting_approval').first().waitFor();
  const { x, y } = await middleOf(page, 'details.prompt > summary');
  await page.mouse.move(x, y);
  await page.mouse.down();
  const changed = page.waitForResponse(async (res) => new URL(res.url()).pathname === `/v1/runs/${id}` &&
    (await res.json()).tool_calls === 1);
  const approved = await api('POST', `/v1/runs/${id}/approvals/approval_1`, keys.write, { decision: 'approve' });
  assert.equal(approved.status, 200, JSON.stringify(approved.body));
  await (await changed).finished();
  await page.mouse.up();
  await page.locator('details.prompt pre').filter({ hasText: 'Add while the prompt is clicked' }).waitFor();
  await toolCalls.filter({ hasText: /^1$/ }).waitFor();
  await api('POST', `/v1/runs/${id}/cancel`, keys.write, {});
});

scenario('a click on a run in the list is kept while the list refreshes under it', async (page) => {
  // The list is fetched again every 2 s; the press on a run's link lasts
  // over two fetches, whose answers must not redraw the link away.
  await signIn(page, keys.write);
  const { x, y, href } = await middleOf(page, 'tbody a[href^="#/runs/"]');
  await page.mouse.move(x, y);
  await page.mouse.down();
  for (let i = 0; i < 2; i++) {
    await page.waitForResponse((res) => new URL(res.url()).pathname === '/v1/runs' && res.request().method() === 'GET');
  }
  await page.mouse.up();
  await page.waitForURL((url) => url.hash === href);
});

scenario('a conversation is continued from its page', async (page) => {
  await signIn(page, keys.write);
  await startRun(page, 'Remember the word kiwi');
  await answer(page).filter({ hasText: 'Noted: kiwi.' }).waitFor();
  await page.locator('dd a[href^="#/conversations/"]').click();
  await page.waitForURL(/#\/conversations\/[^/]+$/);
  await page.locator('.bubble.user').filter({ hasText: 'Remember the word kiwi' }).waitFor();
  await page.locator('.bubble.assistant-msg').filter({ hasText: 'Noted: kiwi.' }).waitFor();
  await page.getByLabel('Next prompt').fill('What was the word?');
  await page.getByRole('button', { name: 'Send' }).click();
  await answer(page).filter({ hasText: 'The word was kiwi.' }).waitFor();
  await page.locator('.bubble.assistant-msg').filter({ hasText: 'The word was kiwi.' }).waitFor();
  await shot(page, 'conversation.png');
  await page.getByRole('link', { name: 'Conversations', exact: true }).click();
  await page.locator('table code').first().waitFor();
});

scenario('a schedule is run now from its page', async (page) => {
  await signIn(page, keys.admin, '#/schedules');
  const row = page.locator('tr').filter({ hasText: 'nightly' });
  await row.getByText('0 3 * * *').waitFor();
  await shot(page, 'schedules.png');
  await row.getByRole('button', { name: 'Run now' }).click();
  await page.waitForURL(/#\/runs\/[^/]+$/);
  await answer(page).filter({ hasText: 'All quiet.' }).waitFor();
  await page.getByText('schedule:nightly').first().waitFor();
});

scenario('the start form sends every field of the run request', async (page) => {
  const kiwi = (await runsWith('Remember the word kiwi', keys.write)).ids;
  assert.equal(kiwi.length, 1, 'the kiwi run of an earlier scenario');
  const conversation = (await api('GET', `/v1/runs/${kiwi[0]}`, keys.write)).body.conversation_id;
  // Only an admin key may give a run a server with a command.
  await signIn(page, keys.admin);
  await page.getByText('Options', { exact: true }).click();
  const form = page.getByRole('form', { name: 'Start a run' });
  await form.getByLabel('Prompt', { exact: true }).fill('Form fields check: echo through my own server');
  await form.getByLabel('Profile').fill('no-such-profile');
  await form.getByLabel(/^Model/).fill('openai/fake-model');
  await form.getByLabel(/^System prompt/).fill('You are terse.');
  await form.getByLabel('Max steps').fill('3');
  await form.getByLabel(/^Max tokens/).fill('50000');
  await form.getByLabel('Max cost (USD)').fill('2.5');
  await form.getByLabel(/^Max duration/).fill('10m');
  await form.getByLabel('Approval', { exact: true }).selectOption('always');
  await form.getByLabel(/^Continue conversation/).fill(conversation);
  await form.getByLabel(/Interactive/).uncheck();
  // A per-run server list that is not JSON is refused in the page.
  const servers = form.getByLabel(/^Per-run servers/);
  await servers.fill('[{"name": "mine",');
  let posted = 0;
  page.on('request', (r) => { if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/runs') posted++; });
  await form.getByRole('button', { name: 'Start run' }).click();
  await form.getByText(/Per-run servers: not JSON/).waitFor();
  assert.equal(await servers.getAttribute('aria-invalid'), 'true');
  const mine = JSON.parse(env('EVERYTHING_SERVER'));
  await servers.fill(JSON.stringify([mine], null, 1));
  await shot(page, 'start-form.png');
  assert.equal(posted, 0, 'nothing was sent while a field was wrong');
  const request = page.waitForRequest((r) => r.method() === 'POST' && new URL(r.url()).pathname === '/v1/runs');
  await form.getByRole('button', { name: 'Start run' }).click();
  const body = (await request).postDataJSON();
  assert.deepEqual(body, {
    prompt: 'Form fields check: echo through my own server', interactive: false, profile: 'no-such-profile', model: 'openai/fake-model',
    system_prompt: 'You are terse.', max_steps: 3, max_tokens: 50000, max_cost_usd: 2.5, max_duration: '10m', approval: 'always',
    mcp_servers: [mine], conversation_id: conversation,
  });
  await page.waitForURL(/#\/runs\/[^/]+$/);
  const id = decodeURIComponent(page.url().split('#/runs/')[1]);
  // The run created has them: its model, profile and conversation; its
  // step limit; its own server; approval always (the echo waits).
  const run = (await api('GET', `/v1/runs/${id}`, keys.admin)).body;
  assert.equal(run.model, 'openai/fake-model');
  assert.equal(run.profile, 'no-such-profile');
  assert.equal(run.conversation_id, conversation);
  await page.locator('.approval.question').filter({ hasText: 'mcp_mine_echo' }).getByRole('button', { name: 'Approve' }).click();
  await answer(page).filter({ hasText: 'Form: Echo: form' }).waitFor();
  const events = await runEvents(id, keys.admin);
  const of = (type) => events.filter((e) => e.type === type).map((e) => e.data);
  assert.equal(of('run.started')[0].max_steps, 3);
  assert.deepEqual(of('mcp.server.connected').filter((d) => d.server === 'mine').map((d) => d.source), ['run']);
  assert.deepEqual(of('approval.requested').map((d) => d.tool), ['mcp_mine_echo']);
  assert.equal(of('profile.missing').length, 1);
});

scenario('the timeline grows while a run goes, and an approval decided stays in place', async (page) => {
  await signIn(page, keys.write);
  const id = await startRun(page, 'Add slowly with approval');
  // Waiting for the approval: one model step done, the call and its
  // approval open, growing as time passes.
  await waitForBars(page, { model: 1, tool: 1, approval: 1, question: 0, open: 2 }, 'waiting for the approval');
  assert.deepEqual(expectedBars(await runEvents(id, keys.write, (evs) => evs.some((e) => e.type === 'approval.requested'))), { model: 1, tool: 1, approval: 1, question: 0, open: 2 });
  const approvalBar = page.locator('svg.tl-chart g.tl-approval');
  const ms0 = Number(await approvalBar.getAttribute('data-ms'));
  const width0 = Number(await approvalBar.locator('rect').getAttribute('width'));
  await page.waitForFunction(([ms, w]) => {
    const g = document.querySelector('svg.tl-chart g.tl-approval');
    return Number(g.dataset.ms) >= ms + 600 && Number(g.querySelector('rect').getAttribute('width')) > w;
  }, [ms0, width0]);
  // The card waits by its call; decided, it is the same card in the same place.
  const card = page.locator('.approval.question').filter({ hasText: '"a": 5' });
  const before = await card.evaluate((c) => {
    window.gatedCard = c;
    const li = c.closest('ol.timeline > li');
    return { index: [...li.parentElement.children].indexOf(li), byCall: c.previousElementSibling.matches('details.tool') };
  });
  assert.equal(before.byCall, true, 'the open card sits by its call');
  await card.getByRole('button', { name: 'Approve' }).click();
  await page.waitForFunction((index) => {
    const c = window.gatedCard;
    const li = c.closest('ol.timeline > li');
    return c.isConnected && c.classList.contains('decided') && c.textContent.includes('Approved by writer') &&
      !c.textContent.includes('Approval needed') && !c.querySelector('input, button') &&
      [...li.parentElement.children].indexOf(li) === index;
  }, before.index);
  await answer(page).filter({ hasText: 'Eleven.' }).waitFor();
  // Ended: a bar for each pair of events, none open.
  const want = expectedBars(await runEvents(id, keys.write));
  assert.deepEqual(want, { model: 2, tool: 1, approval: 1, question: 0, open: 0 });
  await waitForBars(page, want, 'ended');
  await page.locator('svg.tl-chart g.tl-model title').filter({ hasText: /latency.*; 900 tokens in, 30 out, \$0\.00/ }).waitFor({ state: 'attached' });
  await shot(page, 'timeline.png');
});

scenario('the timeline of every ended run has a bar per pair of its events', async (page) => {
  await signIn(page, keys.admin);
  const list = (await api('GET', '/v1/runs', keys.admin)).body.runs.filter((r) => ['completed', 'failed', 'cancelled'].includes(r.status));
  assert.ok(list.length >= 8, `${list.length} ended runs`);
  const kinds = { model: 0, tool: 0, approval: 0, question: 0 };
  for (const r of list) {
    const want = expectedBars(await runEvents(r.id, keys.admin));
    for (const k of Object.keys(kinds)) kinds[k] += want[k];
    await page.goto(`${base}/ui/#/runs/${encodeURIComponent(r.id)}`);
    await page.locator('.status-' + r.status).first().waitFor();
    await waitForBars(page, want, `run ${r.id}`);
  }
  for (const [k, n] of Object.entries(kinds)) assert.ok(n > 0, `no ${k} bar in any run`);
});

scenario('a search finds a run by a word of its prompt', async (page) => {
  const { ids, total } = await runsWith('details', keys.write);
  assert.ok(ids.length >= 1 && ids.length < total, `${ids.length} of ${total} runs hold the word`);
  await signIn(page, keys.write);
  await page.getByLabel('Search').fill('DETAILS');
  await page.waitForURL(/#\/runs\?q=DETAILS$/);
  await page.waitForFunction((want) => {
    const got = [...document.querySelectorAll('tbody a[href^="#/runs/"]')].map((a) => decodeURIComponent(a.getAttribute('href').slice(7)));
    return got.length === want.length && want.every((id) => got.includes(id));
  }, ids);
  await page.getByLabel('Search').fill('nothing-holds-this-word');
  await page.getByText('No runs match “nothing-holds-this-word”.').waitFor();
});

scenario('a conversation is deleted from its page', async (page) => {
  await signIn(page, keys.write, '#/conversations');
  await page.getByLabel('Search').fill('kiwi');
  const rows = page.locator('tbody a[href^="#/conversations/"]');
  await page.waitForFunction(() => document.querySelectorAll('tbody a[href^="#/conversations/"]').length === 1);
  const href = await rows.first().getAttribute('href');
  const id = decodeURIComponent(href.split('/').pop());
  const runs = (await api('GET', `/v1/conversations/${id}`, keys.write)).body.runs;
  assert.equal(runs.length, 3, 'the kiwi conversation has its two runs and the form\'s');
  await rows.first().click();
  await page.getByRole('heading', { name: 'Remember the word kiwi' }).waitFor();
  await page.getByRole('button', { name: 'Delete', exact: true }).click();
  // Kept at first: the confirmation's Keep leaves it.
  await page.getByRole('button', { name: 'Keep it' }).click();
  assert.equal((await api('GET', `/v1/conversations/${id}`, keys.write)).status, 200);
  await page.getByRole('button', { name: 'Delete', exact: true }).click();
  await page.getByRole('group', { name: 'Confirm the deletion' }).getByRole('button', { name: 'Delete for good' }).click();
  await page.waitForURL(/#\/conversations$/);
  assert.equal((await api('GET', `/v1/conversations/${id}`, keys.write)).status, 404);
  for (const r of runs) assert.equal((await api('GET', `/v1/runs/${r}`, keys.write)).status, 404, `run ${r} went with it`);
  await page.getByLabel('Search').fill('kiwi');
  await page.getByText('No conversations match “kiwi”.').waitFor();
});

scenario('the console is usable at phone width', async (page) => {
  await signIn(page, keys.admin);
  await page.getByRole('heading', { name: 'Runs' }).waitFor();
  await page.reload();
  await page.getByRole('heading', { name: 'Runs' }).waitFor();
  await page.locator('tbody a[href^="#/runs/"]').first().waitFor();
  // Nothing scrolls sideways: not the page, not the list in it.
  await assertFits(page, 'the runs page');
  await shot(page, 'narrow.png');
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => document.activeElement.textContent);
  assert.equal(focused, 'Skip to content', 'the first Tab reaches the skip link');
  // A run's page with its timeline fits too.
  await page.locator('tbody a[href^="#/runs/"]').first().click();
  await page.locator('svg.tl-chart g.tl-bar').first().waitFor();
  await assertFits(page, 'a run\'s page');
}, { width: 390, height: 800 });
