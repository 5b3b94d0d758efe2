// Browser scenarios of the console, run by TestConsoleInBrowser (api_console_browser_test.go)
// against a live harnessd with the scripted model and server-everything:
//   node --test testdata/console/console.test.mjs
// Environment: NODE_MODULES (testdata/npm/node_modules), CONSOLE_URL, GATE_URL (lets the
// scripted model finish its streamed first answer), ADMIN_KEY, WRITE_KEY, READ_KEY, CHROMIUM (the browser),
// ARTIFACTS (where a failed scenario leaves its screenshot and console log), and
// SCREENSHOTS (optional: where each page's screenshot for the README goes).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
// playwright-core comes from testdata/npm/node_modules (NODE_MODULES), pinned there.
const { chromium } = createRequire(join(env('NODE_MODULES'), 'x.js'))('playwright-core');
const base = env('CONSOLE_URL');
const keys = { admin: env('ADMIN_KEY'), write: env('WRITE_KEY'), read: env('READ_KEY') };
let browser;

before(async () => {
  browser = await chromium.launch({ executablePath: env('CHROMIUM'), args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
});
after(async () => { if (browser) await browser.close(); });

// scenario runs fn(page) in a fresh browser context; a failure leaves a
// screenshot and the page's console log in ARTIFACTS, and a dialog (an
// alert a script injected through the page would open) fails it.
function scenario(name, fn, viewport = { width: 1100, height: 800 }) {
  test(name, async () => {
    const ctx = await browser.newContext({ viewport });
    const page = await ctx.newPage();
    // A wait bounds a failure only: CI machines are loaded.
    page.setDefaultTimeout(60000);
    const log = [];
    const dialogs = [];
    page.on('console', (m) => log.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => log.push(`pageerror: ${e.message}`));
    page.on('dialog', async (d) => { dialogs.push(d.message()); await d.dismiss(); });
    try {
      await fn(page);
      assert.deepEqual(dialogs, [], 'no dialog may open');
      const errors = log.filter((l) => l.startsWith('pageerror'));
      assert.deepEqual(errors, [], 'no script error');
    } catch (err) {
      const slug = name.replace(/[^a-z0-9]+/gi, '-');
      const dir = env('ARTIFACTS');
      await page.screenshot({ path: join(dir, slug + '.png'), fullPage: true }).catch(() => {});
      writeFileSync(join(dir, slug + '.console.log'), log.join('\n') + '\n');
      console.log(`--- ${name}: page console log ---\n${log.join('\n')}\n--- screenshot: ${join(dir, slug + '.png')}`);
      throw err;
    } finally {
      await ctx.close();
    }
  });
}

async function shot(page, file) {
  if (!process.env.SCREENSHOTS) return;
  await page.screenshot({ path: join(process.env.SCREENSHOTS, file), fullPage: true });
}

// signIn opens the console and signs in with key.
async function signIn(page, key, hash = '#/runs') {
  await page.goto(base + '/' + hash);
  await page.getByLabel('Key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#who').filter({ hasText: '(' }).waitFor();
}

// startRun fills the start form and waits for the run's page.
async function startRun(page, prompt, opts = {}) {
  await page.getByLabel('Prompt', { exact: true }).fill(prompt);
  if (opts.interactive === false) await page.getByLabel(/Interactive/).uncheck();
  await page.getByRole('button', { name: 'Start run' }).click();
  await page.waitForURL(/#\/runs\/[^/]+$/);
  return decodeURIComponent(page.url().split('#/runs/')[1]);
}

async function api(method, path, key, body) {
  const res = await fetch(base + path, {
    method, headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

const answer = (page) => page.locator('.output');

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
  const box = await page.getByText('Prompt', { exact: true }).boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
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
  const link = page.locator('tbody a[href^="#/runs/"]').first();
  const href = await link.getAttribute('href');
  const box = await link.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
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

scenario('the console is usable at phone width', async (page) => {
  await signIn(page, keys.admin);
  await page.getByRole('heading', { name: 'Runs' }).waitFor();
  await page.reload();
  await page.getByRole('heading', { name: 'Runs' }).waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `the page scrolls sideways by ${overflow}px at 390px`);
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => document.activeElement.textContent);
  assert.equal(focused, 'Skip to content', 'the first Tab reaches the skip link');
}, { width: 390, height: 800 });
