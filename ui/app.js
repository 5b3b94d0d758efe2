// harnessd console: a client of harnessd's HTTP API like curl. It asks who
// the key is (GET /v1/whoami), offers only what that key may do, and routes
// by the URL's fragment: #/runs, #/runs/ID, #/conversations,
// #/conversations/ID, #/servers, #/schedules, #/audit; a list's search and
// filters are in the fragment's query (#/runs?q=word&status=failed).
import { h, clear, api, auth, APIError } from './dom.js';
import { runPage, serversPage, schedulesPage } from './pages.js';
import { runsPage } from './runs.js';
import { conversationsPage, conversationPage } from './conversations.js';
import { auditPage } from './audit.js';

const main = () => document.getElementById('main');
let me = null;
let pageAbort = null;

function can() {
  const scopes = new Set(me ? me.scopes : []);
  const admin = !me || !me.auth || scopes.has('admin');
  return { admin, write: admin || scopes.has('runs:write'), read: true };
}

// signIn shows the key form; message says why (a refused key, say).
function signIn(message) {
  const key = h('input', { type: 'password', id: 'api-key', autocomplete: 'current-password', required: true });
  const status = h('p', { class: 'error', role: 'alert' }, message || '');
  const form = h('form', { class: 'card', 'aria-label': 'Sign in', onsubmit: async (e) => {
    e.preventDefault();
    auth.key = key.value.trim();
    await start();
  } },
  h('h1', {}, 'API key'),
  h('p', {}, 'This harnessd requires an API key (one of [[auth.keys]] or HARNESS_API_KEYS). It is kept in this tab only.'),
  h('label', { for: 'api-key' }, 'Key'), key, h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, 'Sign in')), status);
  clear(main(), form);
  document.getElementById('who').textContent = '';
  document.getElementById('signout').hidden = true;
  key.focus();
}

// start asks who the key is, then shows the page the fragment names.
async function start() {
  try {
    me = await api('GET', '/v1/whoami');
  } catch (err) {
    me = null;
    if (err instanceof APIError && err.status === 401) {
      const had = auth.key;
      auth.key = '';
      signIn(had ? 'That key was refused: ' + err.message : '');
      return;
    }
    clear(main(), h('p', { class: 'notice bad', role: 'alert' }, 'harnessd did not answer: ' + err.message));
    return;
  }
  const who = document.getElementById('who');
  who.textContent = me.auth ? `${me.key} (${me.scopes.join(', ')})` : 'auth off';
  document.getElementById('signout').hidden = !me.auth;
  for (const a of document.querySelectorAll('nav a[data-needs="admin"]')) a.hidden = !can().admin;
  route();
}

function route() {
  if (!me) return;
  if (pageAbort) pageAbort.abort();
  pageAbort = new AbortController();
  const signal = pageAbort.signal;
  const [path, query] = (location.hash.replace(/^#/, '') || '/runs').split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const page = parts[0] || 'runs';
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const el = main();
  const c = can();
  if (page === 'runs' && parts[1]) runPage(el, c, signal, parts[1]);
  else if (page === 'conversations' && parts[1]) conversationPage(el, c, signal, parts[1]);
  else if (page === 'conversations') conversationsPage(el, c, signal, params);
  else if (page === 'servers') serversPage(el, c, signal);
  else if (page === 'schedules' && c.admin) schedulesPage(el, c, signal);
  else if (page === 'schedules') clear(el, h('p', { class: 'notice' }, 'Schedules are shown to admin keys only.'));
  else if (page === 'audit' && c.admin) auditPage(el, c, signal, params);
  else if (page === 'audit') clear(el, h('p', { class: 'notice' }, 'The audit trail is shown to admin keys only.'));
  else runsPage(el, c, signal, params);
  document.title = `harnessd · ${page}${parts[1] ? ' ' + parts[1] : ''}`;
}

window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', () => {
  document.getElementById('signout').addEventListener('click', () => {
    auth.key = '';
    me = null;
    if (pageAbort) pageAbort.abort();
    signIn('');
  });
  start();
});
