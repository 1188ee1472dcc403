/**
 * `berth logs SESSION --turn T`: a turn's timeline as lines, one per entry, the time (UTC)
 * first; a try's start, end and resume at the margin, what happened within it indented.
 * With --follow, the timeline is read again every second and only entries not printed yet
 * are printed, until the turn's work is over (committed, or its messages given up).
 */
import type { Berth } from '../client/index.js';
import { BerthError, sleep, type TimelineEntry, type TurnTimeline } from '../core/index.js';

/** How often --follow reads the timeline again. */
const FOLLOW_EVERY_MS = 1000;

const AT_MARGIN = new Set<TimelineEntry['kind']>(['try-started', 'try-ended', 'resumed']);

export function timelineLine(e: TimelineEntry): string {
  const at = new Date(e.at).toISOString().slice(11, 23);
  return `${at}  ${AT_MARGIN.has(e.kind) ? '' : '  '}${e.detail}`;
}

/** Entries are printed once: one that changes later (a tool call that returned) keeps its first line. */
function keyOf(e: TimelineEntry): string {
  return [e.turnId, e.kind, e.at, e.seq ?? '', e.tool ?? ''].join('\n');
}

/** The turn `ref` names: `last` (the session's newest), a turn id or the workspace version its commit made. */
async function resolveTurn(berth: Berth, sessionId: string, ref: string): Promise<string> {
  if (ref !== 'last') return ref;
  const newest = (await berth.sessions.turns(sessionId)).at(-1);
  if (!newest)
    throw new BerthError(
      'SESSION_TURN_NOT_FOUND',
      `Session ${sessionId} has no turns yet (logs --turn last)`,
      {
        hint: `Send it a message first (berth send ${sessionId} …), or follow its events: berth logs ${sessionId}`,
      },
    );
  return newest.id;
}

export async function printTimeline(
  berth: Berth,
  sessionId: string,
  ref: string,
  o: { follow: boolean; json: boolean; signal?: AbortSignal },
  write: (line: string) => void,
): Promise<void> {
  const turn = await resolveTurn(berth, sessionId, ref);
  const printed = new Set<string>();
  for (;;) {
    const timeline: TurnTimeline = await berth.sessions.timeline(sessionId, turn);
    for (const e of timeline.entries) {
      const key = keyOf(e);
      if (printed.has(key)) continue;
      printed.add(key);
      write(o.json ? JSON.stringify(e) : timelineLine(e));
    }
    if (timeline.truncated && !o.json)
      write(
        '… the turn has more events than a timeline reads: the newest are left out (berth logs without --turn has them all)',
      );
    if (!o.follow || !timeline.running || timeline.truncated || o.signal?.aborted) return;
    await sleep(FOLLOW_EVERY_MS, o.signal);
  }
}
