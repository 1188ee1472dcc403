// berth dashboard: plain ES modules, no framework, no CDN. Three views, chosen by the URL
// fragment so each can be linked and reloaded: the overview (#/), a session's page
// (#/sessions/ID, session.js) and the channels (#/channels[/ID], channels.js). Live data: the tenant event stream (/v1/events, read with
// fetch so the token travels in a header) plus /v1/status after each burst of events.

import { hideChannels, refreshChannels, showChannels } from './channels.js';
import { $, api, el, exitCodeOf, follow, showTokenForm, token } from './lib.js';
import { hideSession, refreshSession, sessionShown, showSession } from './session.js';

// ---- sessions

/** Which states each session was seen in, in order: the row's data-seen. */
const seen = new Map();

function displayState(v) {
  if (v.status === 'running' || v.status === 'starting') return 'running';
  if (v.status === 'queued' || v.status === 'backoff') return 'queued';
  if (v.status === 'failed' || v.status === 'archived' || v.status === 'held') return v.status;
  if (v.lastReply && v.pending === 0) {
    const code = exitCodeOf(v.lastReply);
    return code !== null && code !== 0 ? 'nonzero' : 'done';
  }
  return 'idle';
}

function cell(text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function renderSessions(sessions) {
  const tbody = $('#sessions tbody');
  tbody.replaceChildren();
  for (const v of sessions) {
    const state = displayState(v);
    const history = seen.get(v.id) ?? [];
    if (history.at(-1) !== state) history.push(state);
    seen.set(v.id, history);
    const tr = document.createElement('tr');
    tr.dataset.session = v.id;
    const code = exitCodeOf(v.lastReply);
    const stateCell = cell(state === 'nonzero' ? `exit ${code}` : state, 'state');
    stateCell.dataset.state = state;
    tr.dataset.seen = history.join(' ');
    tr.append(
      linkCell(v.id),
      cell(v.agent),
      stateCell,
      // A held session waits for an operator: its code says why. A message in backoff holds the
      // session's later messages: say which one they wait for.
      cell(v.hold ? v.hold.code : v.heldBy ? `behind #${v.heldBy.messageId}` : (v.queuePosition ?? '–'), v.hold ? 'hold' : undefined),
      cell(v.etaMs == null ? '–' : `${Math.round(v.etaMs / 1000)} s`),
      cell(v.hold ? v.hold.message : (v.currentTurn?.progress ?? '')),
      cell(v.lastReply ? lastReplyText(v.lastReply, code) : ''),
      interruptCell(v),
    );
    tr.addEventListener('click', (e) => {
      if (!e.target.closest('button, a')) location.hash = sessionHash(v.id);
    });
    tbody.append(tr);
  }
}

const sessionHash = (id) => `#/sessions/${encodeURIComponent(id)}`;

function linkCell(id) {
  const a = el('a', null, id);
  a.href = sessionHash(id);
  return el('td', null, null, a);
}

/** A job's reply may have no output: then its exit code and error output say what happened. */
function lastReplyText(reply, code) {
  const text = reply.text || reply.data?.stderr || '';
  return `${code !== null && code !== 0 ? `exit ${code}: ` : ''}${text.slice(0, 80)}`;
}

/**
 * A session with a running turn gets an Interrupt button: the turn's work is discarded, its
 * messages end interrupted and the session goes on with its next message. The request names
 * the turn, so a click that arrives after it committed interrupts no later turn.
 */
function interruptCell(v) {
  const td = document.createElement('td');
  const turn = v.currentTurn;
  if (!turn || turn.status !== 'running') return td;
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'interrupt';
  button.textContent = turn.interruptRequestedAt ? 'interrupting…' : 'Interrupt';
  button.disabled = Boolean(turn.interruptRequestedAt);
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const qs = new URLSearchParams({ discard: 'true', turn: turn.id });
      await api(`/v1/sessions/${encodeURIComponent(v.id)}/interrupt?${qs}`, { method: 'POST' });
      button.textContent = 'interrupting…';
    } catch (err) {
      button.textContent = err.body?.error?.code ?? err.message;
    }
  });
  td.append(button);
  return td;
}

/** Each worker with its sandboxes as chips coloured by phase; below, the sandboxes that ended lately and why. */
function renderWorkers(status) {
  const box = $('#workers');
  box.replaceChildren();
  const live = status.sandboxes.filter((s) => s.phase !== 'gone');
  for (const w of status.workers) {
    const div = document.createElement('div');
    const draining = w.alive && w.drainingSince !== null;
    div.className = `worker${w.alive ? '' : ' dead'}${draining ? ' draining' : ''}`;
    const mine = live.filter((s) => s.workerId === w.id);
    const bound = mine.filter((s) => s.sessionId !== null).length;
    const state = w.alive ? (draining ? `draining since ${new Date(w.drainingSince).toLocaleTimeString()}` : 'alive') : 'dead';
    div.textContent = `${w.id} (${state}, ${bound}/${w.slots} slots, ${mine.length - bound} warm) `;
    for (const s of mine) {
      const span = document.createElement('span');
      span.className = `sandbox phase-${s.phase}`;
      span.title = `${s.name}: ${s.phase}${s.turnId ? ` turn ${s.turnId}` : ''}`;
      span.textContent = s.sessionId ? `${s.sessionId} g${s.generation} ${s.phase}` : s.phase;
      div.append(span);
    }
    box.append(div);
  }
  renderSandboxes(status.sandboxes);
}

/** Every sandbox listed (live, and ended in the last 10 minutes), newest first: its phase and why it ended. */
function renderSandboxes(sandboxes) {
  const tbody = $('#sandboxes tbody');
  tbody.replaceChildren();
  for (const s of sandboxes) {
    const failed = s.endPlanned === false;
    const tr = el('tr', failed ? 'bad' : null);
    tr.dataset.session = s.sessionId ?? '';
    tr.dataset.phase = s.phase;
    const phase = el('td', `phase phase-${s.phase}`, s.phase);
    tr.append(
      el('td', 'mono', s.name),
      el('td', null, s.sessionId ? `${s.sessionId} g${s.generation}` : '(warm)'),
      el('td', null, s.workerId),
      phase,
      el('td', null, new Date(s.endedAt ?? s.updatedAt).toLocaleTimeString()),
      el('td', failed ? 'reason fault' : 'reason', s.endReason ? `${s.endReason}: ${s.endMessage ?? ''}` : ''),
    );
    tbody.append(tr);
  }
}

let refreshing = null;
async function refresh() {
  if (refreshing) return refreshing;
  refreshing = (async () => {
    try {
      const [status, list] = await Promise.all([api('/v1/status'), api('/v1/sessions')]);
      renderSessions(list.sessions);
      renderWorkers(status);
      const alive = status.workers.filter((w) => w.alive);
      // The counts the store keeps: the list is its first page only.
      const c = status.counts;
      $('#summary').textContent = `${c.sessions} sessions (${c.runningTurns} running) · ${status.queueDepth} queued · ${status.sandboxes.length} sandboxes · ${alive.length} workers`;
    } catch (err) {
      if (err.status === 401) showTokenForm();
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

// ---- latency chart (turn start → reply, from the event stream)

const turnStarts = new Map();
const latencies = [];

function drawLatency() {
  const canvas = $('#latency');
  const ctx = canvas.getContext('2d');
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const max = Math.max(1, ...latencies);
  const w = canvas.width / 60;
  ctx.fillStyle = '#0b62c4';
  latencies.forEach((s, i) => {
    const h = (s / max) * (canvas.height - 16);
    ctx.fillRect(i * w + 1, canvas.height - h, w - 2, h);
  });
  ctx.fillStyle = '#555';
  ctx.fillText(`max ${max.toFixed(1)} s`, 4, 12);
}

// ---- events

/** Which inbound messages an event is about: a reply's own messages, or the one retried, failed or queued. */
function about(e) {
  const d = e.data;
  if (e.type === 'reply') return `to ${(d.inReplyTo ?? []).map((id) => `#${id}`).join(' ')} `;
  return d.messageId != null ? `#${d.messageId} ` : '';
}

function onEvent(e) {
  const d = e.data;
  if (e.type === 'started') turnStarts.set(d.turnId, d.at);
  if (e.type === 'reply' && turnStarts.has(d.turnId)) {
    latencies.push((d.at - turnStarts.get(d.turnId)) / 1000);
    turnStarts.delete(d.turnId);
    if (latencies.length > 60) latencies.shift();
    drawLatency();
  }
  const li = document.createElement('li');
  const detail = d.text ?? d.error ?? (d.position != null ? `position ${d.position}` : d.attempt ? `attempt ${d.attempt}` : '');
  li.textContent = `${new Date(d.at).toLocaleTimeString()} ${d.sessionId} ${e.type} ${about(e)}${String(detail).slice(0, 100)}`;
  const list = $('#events');
  list.prepend(li);
  while (list.children.length > 100) list.lastChild.remove();
  clearTimeout(onEvent.timer);
  onEvent.timer = setTimeout(refresh, 100);
  // The session page reads the whole conversation: only when its session moved.
  if (d.sessionId === sessionShown()) {
    clearTimeout(onEvent.sessionTimer);
    onEvent.sessionTimer = setTimeout(refreshSession, 100);
  }
}

// ---- warm pool (from /metrics, admin token only) and chaos reports

async function refreshPool() {
  try {
    const text = await api('/metrics');
    const m = /^berth_warm_pool_size (\S+)$/m.exec(text);
    $('#pool').textContent = `warm pool: ${m ? m[1] : '–'}`;
  } catch {
    $('#pool').textContent = 'warm pool: – (admin token only)';
  }
}

async function refreshChaos() {
  let reports;
  try {
    reports = (await api('/v1/chaos/reports')).reports;
  } catch {
    return;
  }
  if (reports.length === 0) return;
  const box = $('#chaos');
  box.replaceChildren();
  for (const r of reports) {
    const head = document.createElement('p');
    const t = r.timing;
    const p50 = (s) => (s ? `${s.p50} ms` : '–');
    head.textContent =
      `${new Date(r.startedAt).toLocaleString()} · ${r.passed ? 'PASS' : 'FAIL'} · ` +
      `sandbox kills ${t['sandbox-kill'].injected} (detect p50 ${p50(t['sandbox-kill'].detectMs)}, recover p50 ${p50(t['sandbox-kill'].recoverMs)}) · ` +
      `worker kills ${t['worker-kill'].injected} (detect p50 ${p50(t['worker-kill'].detectMs)}, recover p50 ${p50(t['worker-kill'].recoverMs)})` +
      (t.partition?.injected ? ` · partitions ${t.partition.injected} (detect p50 ${p50(t.partition.detectMs)}, recover p50 ${p50(t.partition.recoverMs)})` : '') +
      (t['node-kill']?.injected ? ` · node kills ${t['node-kill'].injected} (detect p50 ${p50(t['node-kill'].detectMs)}, recover p50 ${p50(t['node-kill'].recoverMs)})` : '') +
      (t['blobs-kill']?.injected ? ` · S3 kills ${t['blobs-kill'].injected}` : '');
    const line = document.createElement('div');
    line.className = 'timeline';
    for (const f of r.faults) {
      const mark = document.createElement('span');
      mark.className = `mark ${f.kind}`;
      mark.style.left = `${Math.min(99.5, ((f.at - r.startedAt) / r.wallMs) * 100)}%`;
      mark.title = `${f.kind} at +${((f.at - r.startedAt) / 1000).toFixed(1)} s`;
      line.append(mark);
    }
    box.append(head, line);
  }
}

// ---- send

$('#send-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const session = $('#send-session').value.trim();
  const agent = $('#send-agent').value.trim();
  try {
    const posted = await api(`/v1/sessions/${encodeURIComponent(session)}/messages`, {
      method: 'POST',
      body: JSON.stringify({ text: $('#send-text').value, ...(agent ? { agent } : {}) }),
    });
    $('#send-result').textContent = `message ${posted.message.id} accepted (${posted.session.queuePosition ? `queue position ${posted.session.queuePosition}` : posted.session.status})`;
    refresh();
  } catch (err) {
    $('#send-result').textContent = `${err.message}${err.body?.error?.hint ? ` — ${err.body.error.hint}` : ''}`;
  }
});

// ---- views: #/sessions/ID is a session's page, #/channels[/ID] the channels, anything else the overview

function route() {
  const session = /^#\/sessions\/([^/]+)$/.exec(location.hash);
  const channels = /^#\/channels(?:\/([^/]+))?$/.exec(location.hash);
  $('#overview').hidden = Boolean(session || channels);
  $('#session-page').hidden = !session;
  $('#channels-page').hidden = !channels;
  if (session) showSession(decodeURIComponent(session[1]));
  else hideSession();
  if (channels) showChannels(channels[1] === undefined ? null : decodeURIComponent(channels[1]));
  else hideChannels();
}
window.addEventListener('hashchange', route);

if (!token) showTokenForm();
else {
  route();
  refresh();
  refreshPool();
  refreshChaos();
  setInterval(refresh, 2000);
  setInterval(refreshPool, 5000);
  setInterval(refreshChaos, 10000);
  setInterval(refreshSession, 10000);
  setInterval(refreshChannels, 5000);
  follow('/v1/events', onEvent);
}
