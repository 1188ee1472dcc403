// A turn's timeline on the session page (GET /v1/sessions/:id/turns/:turn/timeline): one
// bar per try on a shared time axis, with marks for its model calls, tool calls and
// checkpoints, a cross where a try was killed and an arrow where the next one resumed;
// every mark's line (the same as `berth logs --turn`) on hover and in the list below.
// A running try's bar reaches to now: the page reads it again on each of the session's
// events (a checkpoint, a tool call) and draws it again every second while it runs.

import { el, formatMs } from './lib.js';

/** Local time to the millisecond: marks can be ms apart. */
const clock = (at) => `${new Date(at).toLocaleTimeString([], { hour12: false })}.${String(at % 1000).padStart(3, '0')}`;

/** Marks drawn on a try's bar; the other entries are in the list only. */
const MARKS = new Set(['model-call', 'tool-call', 'checkpoint', 'resumed', 'try-ended']);

export function renderTimeline(box, timeline, now = Date.now()) {
  // A redraw keeps the list open if the operator opened it.
  const open = box.querySelector('details')?.open ?? false;
  box.replaceChildren();
  box.dataset.turn = timeline.turnId;
  box.dataset.running = String(timeline.running);
  if (timeline.tries.length === 0) return;
  const from = timeline.tries[0].startedAt;
  const to = Math.max(from + 1, timeline.running ? now : 0, ...timeline.tries.map((t) => t.endedAt ?? now));
  const x = (at) => `${(((at - from) / (to - from)) * 100).toFixed(3)}%`;

  for (const t of timeline.tries) {
    const row = el('div', 'tl-try');
    row.dataset.attempt = String(t.attempt);
    row.dataset.status = t.status;
    if (t.resumedFrom !== null) row.dataset.resumedFrom = String(t.resumedFrom);
    const label = el('span', 'tl-label', `try ${t.attempt}`);
    const track = el('div', 'tl-track');
    const bar = el('div', `tl-bar ${t.status}`);
    bar.style.left = x(t.startedAt);
    bar.style.width = `calc(${x(t.endedAt ?? now)} - ${x(t.startedAt)})`;
    bar.title = `try ${t.attempt}: ${t.status}${t.code ? ` ${t.code}` : ''} — ${formatMs((t.endedAt ?? now) - t.startedAt)}`;
    track.append(bar);
    for (const e of timeline.entries) {
      if (e.turnId !== t.turnId || !MARKS.has(e.kind)) continue;
      // A try that committed needs no end mark: its bar ends there.
      if (e.kind === 'try-ended' && e.status === 'committed') continue;
      const kind = e.kind === 'try-ended' ? 'kill' : e.kind;
      const mark = el('span', `tl-mark ${kind}`, kind === 'kill' ? '✕' : kind === 'resumed' ? '▶' : '');
      mark.dataset.kind = kind;
      if (e.seq !== undefined) mark.dataset.seq = String(e.seq);
      if (e.code) mark.dataset.code = e.code;
      mark.style.left = x(e.at);
      if (e.kind === 'tool-call') mark.style.width = `calc(${x(e.endedAt ?? t.endedAt ?? now)} - ${x(e.at)})`;
      mark.title = `${clock(e.at)} ${e.detail}`;
      track.append(mark);
    }
    row.append(label, track);
    box.append(row);
  }
  box.append(
    el('div', 'tl-axis', null, el('span', null, clock(from)), el('span', null, `${formatMs(to - from)}${timeline.running ? ' so far' : ''}`), el('span', null, timeline.running ? 'now' : clock(to))),
    el(
      'div',
      'tl-legend muted',
      null,
      ...[
        ['model-call', 'model call'],
        ['tool-call', 'tool call'],
        ['checkpoint', 'checkpoint'],
        ['kill', 'killed / ended'],
        ['resumed', 'resumed'],
      ].map(([kind, text]) => el('span', null, null, el('span', `tl-key ${kind}`), ` ${text}`)),
    ),
  );
  const lines = el('ol', 'tl-lines mono');
  for (const e of timeline.entries) {
    const li = el('li', `tl-line ${e.kind}`, `${clock(e.at)}  ${e.detail}`);
    li.dataset.kind = e.kind;
    lines.append(li);
  }
  if (timeline.truncated) lines.append(el('li', 'muted', '… more events than a timeline reads: the newest are left out'));
  const details = el('details', null, null, el('summary', null, `${timeline.entries.length} entries`), lines);
  details.open = open;
  box.append(details);
}
