// What the console's browser scenarios share: the browser, the scenario
// wrapper that keeps a failed one's screenshot and console log, sign-in,
// screenshots and direct API calls. Environment: NODE_MODULES
// (testdata/npm/node_modules), CONSOLE_URL, CHROMIUM (the browser),
// ARTIFACTS (where a failed scenario leaves its screenshot and console log),
// SCREENSHOTS (optional: where each page's screenshot for the README goes).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';

export const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
// playwright-core comes from testdata/npm/node_modules (NODE_MODULES), pinned there.
const { chromium } = createRequire(join(env('NODE_MODULES'), 'x.js'))('playwright-core');
export const base = env('CONSOLE_URL');
let browser;
// contexts holds the browser context of each viewport, shared by the
// scenarios of the file: a context costs the browser about a second of
// CPU to make, and a page of its own is what a scenario needs (the
// console keeps its key in the page's sessionStorage, and uses no other
// storage, so a new page starts signed out).
const contexts = new Map();

before(async () => {
  browser = await chromium.launch({ executablePath: env('CHROMIUM'), args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
});
after(async () => { if (browser) await browser.close(); });

// contextFor returns the shared context of viewport, made on first use.
function contextFor(viewport) {
  const key = `${viewport.width}x${viewport.height}`;
  if (!contexts.has(key)) contexts.set(key, browser.newContext({ viewport }));
  return contexts.get(key);
}

// scenario runs fn(page) in a fresh page; a failure leaves a screenshot
// and the page's console log in ARTIFACTS, and a dialog (an alert a
// script injected through the page would open) fails it.
export function scenario(name, fn, viewport = { width: 1100, height: 800 }) {
  test(name, async () => {
    const page = await (await contextFor(viewport)).newPage();
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
      await page.close();
    }
  });
}

// shot saves the page's screenshot as file in SCREENSHOTS, when it is set.
export async function shot(page, file) {
  if (!process.env.SCREENSHOTS) return;
  await page.screenshot({ path: join(process.env.SCREENSHOTS, file), fullPage: true });
}

// signIn opens the console and signs in with key.
export async function signIn(page, key, hash = '#/runs') {
  await page.goto(base + '/' + hash);
  await page.getByLabel('Key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#who').filter({ hasText: '(' }).waitFor();
}

// api calls a route with key, as curl would.
export async function api(method, path, key, body) {
  const res = await fetch(base + path, {
    method, headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}
