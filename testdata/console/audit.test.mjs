// Browser scenarios of the audit page, run by TestConsoleAuditInBrowser
// (api_console_audit_browser_test.go) against a live harnessd after a run
// of the key "writer" (RUN_ID) that called mcp_web_echo and a tool whose
// name is markup, and the admin "ops" restarting the server web:
//   node --test testdata/console/audit.test.mjs
// Environment: as browser.mjs, plus ADMIN_KEY, READ_KEY and RUN_ID.
import assert from 'node:assert/strict';
import { env, scenario, signIn, shot, api } from './browser.mjs';

const keys = { admin: env('ADMIN_KEY'), read: env('READ_KEY') };
const runID = env('RUN_ID');
const markup = '<img src=x onerror=alert(1)>';

// rows are the audit table's rows.
const rows = (page) => page.getByRole('table', { name: 'Records' }).locator('tbody tr');

// filter sets the filter labelled label to value and applies the filters.
async function filter(page, label, value) {
  const el = page.getByLabel(label, { exact: true });
  if (await el.evaluate((e) => e.tagName === 'SELECT')) await el.selectOption(value);
  else await el.fill(value);
  await page.getByRole('button', { name: 'Apply' }).click();
}

// shows waits until the table shows exactly the rows with the texts want.
async function shows(page, want) {
  for (const text of want) await rows(page).filter({ hasText: text }).first().waitFor();
  await page.waitForFunction((n) => document.querySelectorAll('table[aria-label="Records"] tbody tr').length === n, want.length);
}

scenario('an admin lists the audit trail and filters it', async (page) => {
  await signIn(page, keys.admin, '#/audit');
  const echo = rows(page).filter({ hasText: 'mcp_web_echo' });
  await echo.waitFor();
  for (const text of ['tool_call', 'writer', runID, 'web', 'ok']) await echo.getByText(text, { exact: true }).first().waitFor();
  assert.equal(await echo.getByRole('link', { name: runID }).getAttribute('href'), '#/runs/' + runID, 'the record links its run');
  // The tool the model named with markup is shown as the text it is.
  const odd = rows(page).filter({ hasText: markup });
  await odd.getByText('error', { exact: true }).waitFor();
  assert.equal(await page.locator('img[src="x"]').count(), 0, 'no markup from a record becomes an element');
  const restart = rows(page).filter({ hasText: 'POST /v1/mcp/servers/{name}/restart' });
  for (const text of ['admin', 'ops', /^HTTP 2\d\d$/]) await restart.getByText(text, { exact: true }).first().waitFor();
  await shot(page, 'audit.png');

  const trail = await api('GET', '/v1/audit', keys.admin);
  assert.equal(trail.status, 200);
  await shows(page, trail.body.records.map((r) => r.tool || r.action || r.type));

  await filter(page, 'Type', 'admin');
  await shows(page, ['POST /v1/mcp/servers/{name}/restart']);
  assert.match(page.url(), /#\/audit\?type=admin$/, 'the filters are in the address');
  await filter(page, 'Type', '');
  await filter(page, 'Key', 'writer');
  await shows(page, ['mcp_web_echo', markup]);
  await filter(page, 'Server', 'web');
  await shows(page, ['mcp_web_echo']);
  await filter(page, 'Server', '');
  await filter(page, 'Tool', markup);
  await shows(page, [markup]);
  await filter(page, 'Tool', '');
  await filter(page, 'Since', '2999-01-01T00:00');
  await rows(page).getByText('No audit records match.').waitFor();
  await filter(page, 'Since', '');
  await filter(page, 'Until', '2999-01-01T00:00');
  await shows(page, ['mcp_web_echo', markup]);

  // The address keeps the filters: a reload shows the same list.
  await page.reload();
  await shows(page, ['mcp_web_echo', markup]);
  assert.equal(await page.getByLabel('Key', { exact: true }).inputValue(), 'writer');
});

scenario('a runs:read key is told the audit trail is for admins', async (page) => {
  await signIn(page, keys.read, '#/audit');
  await page.getByText('The audit trail is shown to admin keys only.').waitFor();
  assert.equal(await page.getByRole('link', { name: 'Audit' }).isVisible(), false, 'no Audit link for runs:read');
  assert.equal((await api('GET', '/v1/audit', keys.read)).status, 403);
});
