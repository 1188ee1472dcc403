// The session page (#/sessions/ID): the session's facts and storage cost, its actions
// (fork and rewind at a chosen version, interrupt, delete), its turns (every attempt, with
// its exit codes and why it ended), the timeline of its running or last turn (timeline.js)
// and its conversation. A turn row opens the turn (history.js) and shows its timeline.

import { openTurn, showFiles } from './history.js';
import { renderTimeline } from './timeline.js';
import { $, allPages, api, clearResult, el, errorText, exitCodeOf, formatBytes, formatMs, showOutcome, statusOf, time } from './lib.js';

/** The session shown, or null on the overview. */
let current = null;

const path = (id, rest = '') => `/v1/sessions/${encodeURIComponent(id)}${rest}`;

export function sessionShown() {
  return current?.id ?? null;
}

export async function showSession(id) {
  // timelineTurn: the turn whose timeline shows (null: the running or last one); timeline: as last read.
  current = { id, view: null, retained: null, timelineTurn: null, timeline: null };
  $('#s-title').textContent = `Session ${id}`;
  resetResult();
  // Another session's versions: its choices do not carry over.
  $('#s-version').replaceChildren();
  $('#s-files-version').replaceChildren();
  $('#s-turn-section').hidden = true;
  await refreshSession();
  if (current?.id === id) await showFiles(id, current.retained?.newest ?? null, '');
}

export function hideSession() {
  current = null;
}

/** Re-reads what may change while the page is open; the opened turn and the file browser stay. */
export async function refreshSession() {
  if (!current) return;
  const { id } = current;
  let view;
  let workspace;
  let turns;
  let messages;
  try {
    [view, workspace, turns, messages] = await Promise.all([
      api(path(id)),
      api(path(id, '/workspace')),
      allPages(path(id, '/turns'), 'turns'),
      allPages(path(id, '/messages'), 'messages'),
    ]);
  } catch (err) {
    if (current?.id === id) $('#s-facts').replaceChildren(el('p', 'error', errorText(err)));
    return;
  }
  if (current?.id !== id) return;
  current.view = view;
  current.retained = workspace.retained;
  renderFacts(view, workspace);
  renderVersions($('#s-version'), workspace.retained);
  renderVersions($('#s-files-version'), workspace.retained);
  $('#s-interrupt').disabled = view.currentTurn?.status !== 'running';
  $('#s-rewind').disabled = $('#s-fork').disabled = !workspace.retained;
  renderTurns(turns, messages);
  renderConversation(messages);
  await refreshTimeline(view.currentTurn?.id ?? turns.at(-1)?.id ?? null);
}

/** The shown turn's timeline (the running or last one unless a turn row was clicked). */
async function refreshTimeline(latest) {
  const { id } = current;
  const turn = current.timelineTurn ?? latest;
  const box = $('#s-timeline');
  $('#s-timeline-turn').textContent = turn ? `turn ${turn}${current.timelineTurn ? '' : ' (the running or last one)'}` : '';
  if (!turn) {
    current.timeline = null;
    box.replaceChildren(el('p', 'muted', 'No turn yet.'));
    return;
  }
  try {
    const timeline = await api(path(id, `/turns/${encodeURIComponent(turn)}/timeline`));
    if (current?.id !== id) return;
    current.timeline = timeline;
    renderTimeline(box, timeline);
  } catch (err) {
    if (current?.id === id) box.replaceChildren(el('p', 'error', errorText(err)));
  }
}

function renderFacts(view, workspace) {
  const facts = [
    ['agent', view.agent],
    ['status', view.status],
    ['workspace version', workspace.version],
    ['versions kept', workspace.retained ? `${workspace.retained.oldest} … ${workspace.retained.newest}` : 'none (resident agent: written in place)'],
    ['storage', `${formatBytes(workspace.bytes)} in ${workspace.objects} objects of the blob store`],
    ['rewinds', workspace.rewinds.map((r) => `v${r.version} ← v${r.toVersion}`).join(', ') || '–'],
  ];
  const dl = $('#s-facts');
  dl.replaceChildren();
  for (const [k, v] of facts) dl.append(el('dt', null, k), el('dd', k === 'storage' ? 'storage' : null, v));
  dl.dataset.version = String(workspace.version);
  dl.dataset.bytes = String(workspace.bytes);
}

/** Keeps the chosen version when the range only grew. */
function renderVersions(select, retained) {
  const keep = select.value;
  select.replaceChildren();
  if (!retained) return;
  for (let v = retained.newest; v >= retained.oldest; v--) select.append(new Option(`v${v}`, String(v)));
  if (keep && Number(keep) >= retained.oldest && Number(keep) <= retained.newest) select.value = keep;
}

/** Each attempt of each turn, newest first; a committed turn whose job exited non-zero is marked as failed. */
function renderTurns(turns, messages) {
  const exits = new Map();
  for (const m of messages) {
    const code = m.direction === 'out' ? exitCodeOf(m) : null;
    if (code !== null) exits.set(m.turnId, [...(exits.get(m.turnId) ?? []), code]);
  }
  const tbody = $('#s-turns tbody');
  tbody.replaceChildren();
  for (const t of [...turns].reverse()) {
    const codes = exits.get(t.id) ?? [];
    const nonZero = codes.some((c) => c !== 0);
    const tr = el('tr', `turn${nonZero || t.status === 'aborted' ? ' bad' : ''}`);
    tr.dataset.turn = t.id;
    tr.dataset.status = t.status;
    const version = t.status === 'committed' && t.baseVersion !== null ? `v${t.baseVersion + 1}` : '–';
    tr.dataset.version = version;
    const exitCell = el('td', nonZero ? 'exit nonzero' : 'exit', codes.length ? codes.join(' ') : '–');
    tr.append(
      el('td', 'mono', t.id),
      el('td', null, version),
      el('td', null, t.attempt),
      el('td', null, null, statusOf(t.status, nonZero ? codes.find((c) => c !== 0) : null)),
      exitCell,
      el('td', null, time(t.startedAt)),
      el('td', null, formatMs(t.endedAt === null ? null : t.endedAt - t.startedAt)),
      el('td', 'fault', t.errorCode ? `${t.errorCode}: ${t.error ?? ''}` : ''),
    );
    tr.addEventListener('click', () => {
      current.timelineTurn = t.id;
      void refreshTimeline(null);
      void openTurn(current.id, t.id);
    });
    tbody.append(tr);
  }
}

function renderConversation(messages) {
  const list = $('#s-conversation');
  list.replaceChildren();
  for (const m of messages) {
    const code = exitCodeOf(m);
    const bad = m.status === 'failed' || (code !== null && code !== 0);
    const li = el('li', `msg ${m.direction}${bad ? ' bad' : ''}`);
    li.dataset.message = String(m.id);
    const who = m.direction === 'in' ? `#${m.id} →` : `#${m.id} ← reply to ${(m.inReplyTo ?? []).map((i) => `#${i}`).join(' ')}`;
    li.append(el('span', 'who', `${time(m.createdAt)} ${who} `), statusOf(m.status, code));
    if (code !== null) li.append(el('span', code === 0 ? 'exit' : 'exit nonzero', ` exit ${code}`));
    if (m.errorCode) li.append(el('span', 'fault', ` ${m.errorCode}: ${m.error ?? ''}`));
    li.append(el('pre', 'text', m.text || (m.direction === 'out' ? '(no output)' : '')));
    if (m.data?.stderr) li.append(el('pre', 'stderr', m.data.stderr));
    list.append(li);
  }
}

// ---- actions: each shows the API's answer, or its error code and message

const resetResult = () => clearResult($('#s-result'));

async function act(run) {
  await showOutcome($('#s-result'), run);
  await refreshSession();
}

const chosenVersion = () => Number($('#s-version').value);

$('#s-fork').addEventListener('click', () =>
  act(async () => {
    const from = chosenVersion();
    const fork = await api(path(current.id, '/fork'), { method: 'POST', body: JSON.stringify({ fromVersion: from }) });
    const link = el('a', null, fork.id);
    link.href = `#/sessions/${encodeURIComponent(fork.id)}`;
    return [`Forked from v${from} into `, link];
  }),
);

$('#s-rewind').addEventListener('click', () =>
  act(async () => {
    const to = chosenVersion();
    if (!confirm(`Rewind session ${current.id} to version ${to}? Its workspace goes back to v${to}'s files as a new version; history is kept.`)) return undefined;
    const r = await api(path(current.id, '/rewind'), { method: 'POST', body: JSON.stringify({ toVersion: to }) });
    return `Rewound: version ${r.version} holds version ${r.toVersion}'s files (${r.objects} objects named, none copied)`;
  }),
);

$('#s-interrupt').addEventListener('click', () =>
  act(async () => {
    const turn = current.view?.currentTurn;
    const qs = new URLSearchParams({ discard: 'true', ...(turn ? { turn: turn.id } : {}) });
    const r = await api(`${path(current.id, '/interrupt')}?${qs}`, { method: 'POST' });
    return `Interrupting turn ${r.turn.id}`;
  }),
);

$('#s-delete').addEventListener('click', () =>
  act(async () => {
    if (!confirm(`Delete session ${current.id}? Its open messages fail and it is archived.`)) return undefined;
    const view = await api(path(current.id), { method: 'DELETE' });
    return `Deleted: the session is ${view.status}`;
  }),
);

// A running turn's bar grows with the clock between the events that bring new entries.
setInterval(() => {
  if (current?.timeline?.running) renderTimeline($('#s-timeline'), current.timeline);
}, 1000);

$('#s-files-version').addEventListener('change', (e) => showFiles(current.id, Number(e.target.value), ''));
