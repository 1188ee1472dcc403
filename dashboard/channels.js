// The channels page (#/channels, admin token): every chat channel with its platform, agent,
// allowlist, state, lease holder and last error, with Pause, Resume and Remove; a channel
// opened (#/channels/ID) shows its outbox, the sends owed and made, a page at a time.

import { $, allPages, api, button, el, page, showError, showOutcome, statusOf, time } from './lib.js';

const OUTBOX_PAGE = 20;
const path = (id, rest = '') => `/v1/channels/${encodeURIComponent(id)}${rest}`;

/** Whether the page is shown: the list is read only then. */
let shown = false;
/** The channel whose outbox is open, and the cursor of each page up to the one shown. */
let opened = null;

export async function showChannels(id) {
  shown = true;
  if (id !== opened?.id) opened = id === null ? null : { id, cursors: [null] };
  $('#c-outbox-section').hidden = !opened;
  await refreshChannels();
  if (opened) await showOutbox();
}

export async function refreshChannels() {
  if (!shown) return;
  const tbody = $('#channels tbody');
  let channels;
  try {
    channels = await allPages('/v1/channels', 'channels');
  } catch (err) {
    showError($('#c-result'), err);
    return;
  }
  tbody.replaceChildren(...channels.map(channelRow));
  if (channels.length === 0) tbody.append(emptyRow('No channel yet: berth channel add (docs/channels.md).', 9));
}

function channelRow(c) {
  const tr = el('tr', `${c.id === opened?.id ? 'open ' : ''}${c.lastError ? 'bad' : ''}`);
  tr.dataset.channel = c.id;
  const state = c.paused ? 'paused' : 'active';
  const stateCell = el('td', 'state', state);
  stateCell.dataset.state = state;
  const leased = c.leaseOwner && c.leaseUntil > Date.now();
  const allowed = [...c.allowUsers, ...c.allowChats.map((chat) => `chat ${chat}`)].join(', ');
  tr.append(
    el('td', 'mono', c.id),
    el('td', null, c.platform),
    el('td', null, c.agent),
    el('td', null, c.mapping),
    el('td', null, allowed || 'nobody'),
    stateCell,
    el('td', 'mono', leased ? `${c.leaseOwner} until ${time(c.leaseUntil)}` : '–'),
    el('td', c.lastError ? 'fault' : null, c.lastError ?? ''),
    el(
      'td',
      'actions',
      null,
      c.paused ? button('Resume', () => act(() => post(c.id, 'resume'))) : button('Pause', () => act(() => post(c.id, 'pause'))),
      button('Remove…', () => act(() => remove(c.id)), 'danger'),
    ),
  );
  tr.addEventListener('click', (e) => {
    if (!e.target.closest('button')) location.hash = `#/channels/${encodeURIComponent(c.id)}`;
  });
  return tr;
}

async function act(run) {
  await showOutcome($('#c-result'), run);
  await refreshChannels();
}

async function post(id, action) {
  const c = await api(path(id, `/${action}`), { method: 'POST' });
  return `Channel ${c.id} is ${c.paused ? 'paused: nothing is read or sent' : 'active again'}`;
}

async function remove(id) {
  if (!confirm(`Remove channel ${id}? Its sessions stay; sends still owed are not sent.`)) return undefined;
  await api(path(id), { method: 'DELETE' });
  if (opened?.id === id) location.hash = '#/channels';
  return `Channel ${id} removed`;
}

// ---- outbox, a page at a time

async function showOutbox() {
  const { id, cursors } = opened;
  const section = $('#c-outbox-section');
  section.hidden = false;
  $('#c-outbox-title').textContent = `Outbox of ${id} (page ${cursors.length})`;
  const tbody = $('#c-outbox tbody');
  let answer;
  try {
    answer = await page(path(id, '/outbox'), cursors.at(-1), OUTBOX_PAGE);
  } catch (err) {
    showError($('#c-result'), err);
    return;
  }
  if (opened?.id !== id) return;
  tbody.replaceChildren(...answer.outbox.map(outboxRow));
  if (answer.outbox.length === 0) tbody.append(emptyRow('Nothing sent or owed.', 7));
  $('#c-outbox').dataset.channel = id;
  $('#c-outbox').dataset.page = String(cursors.length);
  $('#c-prev').disabled = cursors.length === 1;
  $('#c-next').disabled = answer.next === null;
  $('#c-next').onclick = () => {
    cursors.push(answer.next);
    showOutbox();
  };
}

function outboxRow(o) {
  const tr = el('tr', o.status === 'dead' ? 'bad' : null);
  tr.dataset.outbox = String(o.id);
  tr.append(
    el('td', null, o.id),
    el('td', null, o.kind),
    el('td', 'mono', o.chatId),
    el('td', null, null, statusOf(o.status)),
    el('td', null, o.attempts),
    el('td', null, time(o.sentAt ?? o.createdAt)),
    el('td', o.lastError ? 'fault' : null, o.lastError ?? ''),
  );
  return tr;
}

function emptyRow(text, columns) {
  const td = el('td', 'muted', text);
  td.colSpan = columns;
  return el('tr', null, null, td);
}

$('#c-prev').addEventListener('click', () => {
  opened.cursors.pop();
  showOutbox();
});

export function hideChannels() {
  shown = false;
  opened = null;
  $('#c-outbox-section').hidden = true;
}
