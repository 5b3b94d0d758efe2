// Browser scenarios of the servers page's management, run by
// TestConsoleServersInBrowser (api_console_servers_browser_test.go) against a
// live harnessd whose server "echo" is the test binary's fake stdio server
// (mode pid: its tool pid answers the process id):
//   node --test testdata/console/servers.test.mjs
// Environment: as browser.mjs, plus ADMIN_KEY and READ_KEY.
import assert from 'node:assert/strict';
import { env, scenario, signIn, shot, api } from './browser.mjs';

const keys = { admin: env('ADMIN_KEY'), read: env('READ_KEY') };

// echoCard is the card of server echo.
const echoCard = (page) => page.locator('.card').filter({ has: page.getByRole('heading', { name: 'echo', exact: true }) });

// tryTool calls tool from the card's "try a tool" form and returns what
// it shows once the call is over: the result's text, or the error.
async function tryTool(card, tool) {
  const form = card.getByRole('form', { name: 'Try a tool of echo' });
  await form.getByLabel('Tool').selectOption(tool);
  await form.getByRole('button', { name: 'Call' }).click();
  await form.getByText('Calling…').waitFor({ state: 'detached' });
  const pre = form.locator('pre');
  const text = await pre.count() ? await pre.textContent() : await form.locator('.error').textContent();
  return { text, form };
}

scenario('an admin sees the approval policy, tries a tool, restarts the server and disables it', async (page) => {
  await signIn(page, keys.admin, '#/servers');
  const card = echoCard(page);
  await card.locator('.status-ready').waitFor();
  await card.getByText('writes · always for pid').waitFor();
  await card.getByText('Try a tool').click();
  const first = await tryTool(card, 'pid');
  assert.match(first.text, /^\d+$/, 'the pid tool answers a process id');
  const failed = await tryTool(card, 'fail');
  assert.equal(failed.text, 'it failed');
  await failed.form.getByText('The tool reported an error:').waitFor();
  await shot(page, 'servers-try.png');

  await card.getByRole('button', { name: 'Restart' }).click();
  await card.getByText('Restarted: a new connection is starting.').waitFor();
  // The form stays open with what it showed across the redraw.
  await card.getByRole('form', { name: 'Try a tool of echo' }).getByText('The tool reported an error:').waitFor();
  let second = first.text;
  for (let i = 0; i < 600 && second === first.text; i++) {
    // A call while the new process connects fails with its status: call
    // again until the new process answers.
    await card.locator('.status-ready').waitFor();
    const r = await tryTool(card, 'pid');
    if (/^\d+$/.test(r.text)) second = r.text;
  }
  assert.notEqual(second, first.text, 'a new process answers after the restart');
  const listed = await api('GET', '/v1/mcp/servers/echo', keys.admin);
  assert.equal(listed.body.status, 'ready');

  await card.getByRole('button', { name: 'Disable' }).click();
  await card.locator('.status-disabled').waitFor();
  assert.equal(await card.getByRole('button', { name: 'Restart' }).count(), 0, 'no restart for a disabled server');
  await card.getByRole('button', { name: 'Enable' }).click();
  await card.locator('.status-ready').waitFor();
});

scenario('a refused change says why on the card; a runs:read key gets no buttons', async (page) => {
  await signIn(page, keys.admin, '#/servers');
  const envCard = page.locator('.card').filter({ has: page.getByRole('heading', { name: 'from_env', exact: true }) });
  await envCard.getByRole('button', { name: 'Enable' }).click();
  await envCard.getByText(/Enable: server "from_env" comes from HARNESS_MCP_SERVERS, not a config file/).waitFor();
  assert.equal((await api('GET', '/v1/mcp/servers/from_env', keys.admin)).body.status, 'disabled');

  await page.getByRole('button', { name: 'Forget key' }).click();
  await signIn(page, keys.read, '#/servers');
  const card = echoCard(page);
  await card.locator('.status-ready').waitFor();
  await card.getByText('writes · always for pid').waitFor();
  for (const name of ['Restart', 'Disable', 'Enable']) {
    assert.equal(await card.getByRole('button', { name }).count(), 0, `no ${name} button for runs:read`);
  }
  assert.equal(await card.getByText('Try a tool').count(), 0, 'no tool form for runs:read');
});
