/**
 * The chaos workload: what each turn of each session asks a `script` agent to do. Pure.
 *
 * Turn k (1-based) of a session first checks that it starts from exactly the committed
 * result of turns 1..k-1 (log.txt and the `turns` state key), so a turn that sees a killed
 * attempt's partial writes fails an assert. It then appends `k:a`, sleeps, appends `k:b`
 * and records `turns = k`: a kill in the sleep leaves a half-written turn behind, which
 * must never become visible. Two turns in three leave a `tail -f` running in the
 * background: turn 3n with its output redirected, turn 3n+1 holding the job's output (the
 * `npm run dev &` case: the job must still end when its shell exits). The turn after each
 * checks that no `tail` survived.
 *
 * Invariants:
 * - `turnPlan` and `expectedLog` are deterministic functions of their arguments.
 * - After turns 1..k committed exactly once each, log.txt is `expectedLog(k)` and state
 *   `turns` is k; before any turn the file and the key are absent.
 * - The sleep of a turn is in [MIN_SLEEP_MS, MAX_SLEEP_MS].
 */
import type { ScriptPlan, ScriptStep } from '../core/index.js';

export const LOG_FILE = 'log.txt';
export const STATE_KEY = 'turns';
export const MIN_SLEEP_MS = 200;
export const MAX_SLEEP_MS = 900;
/** What the background-process check looks for; the checker scans host processes for it too. */
export const BACKGROUND_COMMAND = `tail -f ${LOG_FILE}`;
/** The step that fails when a previous turn's background `tail` survived into this one. */
export const STRAY_PROCESS_CHECK = '! pgrep -x tail';

export interface WorkloadOptions {
  /** The session's id; it is part of the reply. */
  session: string;
  /** Varies the sleeps between runs; the same seed gives the same plans. */
  seed: number;
}

/** The plan of turn `turn` (1-based) of the session with index `sessionIndex`. */
export function turnPlan(sessionIndex: number, turn: number, opts: WorkloadOptions): ScriptPlan {
  if (!Number.isInteger(turn) || turn < 1) throw new RangeError(`turn must be an integer >= 1, got ${turn}`);
  const before = turn - 1;
  const steps: ScriptStep[] = [
    { assertFile: { path: LOG_FILE, equals: before === 0 ? null : expectedLog(before) } },
    { assertState: { key: STATE_KEY, equals: before === 0 ? null : before } },
  ];
  if (turn > 1 && backgroundOf(before) !== null) steps.push({ run: STRAY_PROCESS_CHECK });
  steps.push({ append: { path: LOG_FILE, content: `${turn}:a\n` } });
  steps.push({ sleep: sleepMs(opts.seed, sessionIndex, turn) });
  const background = backgroundOf(turn);
  if (background !== null) steps.push({ run: background });
  steps.push({ append: { path: LOG_FILE, content: `${turn}:b\n` } });
  steps.push({ putState: { key: STATE_KEY, value: turn } });
  return { steps, reply: expectedReply(opts.session, turn) };
}

/** The background job turn `turn` starts, or null: redirected on 3n, holding the job's output on 3n+1. */
export function backgroundOf(turn: number): string | null {
  if (turn % 3 === 0) return `${BACKGROUND_COMMAND} > /dev/null 2>&1 &`;
  if (turn % 3 === 1) return `${BACKGROUND_COMMAND} &`;
  return null;
}

/** log.txt after `turns` committed turns; '' for 0. */
export function expectedLog(turns: number): string {
  let log = '';
  for (let k = 1; k <= turns; k++) log += `${k}:a\n${k}:b\n`;
  return log;
}

export function expectedReply(session: string, turn: number): string {
  return `${session}:${turn}`;
}

/** Deterministic in [MIN_SLEEP_MS, MAX_SLEEP_MS]: a 32-bit integer hash of (seed, session, turn). */
export function sleepMs(seed: number, sessionIndex: number, turn: number): number {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b);
  h = Math.imul(h ^ (sessionIndex + 0x27d4eb2f), 0xc2b2ae35);
  h = Math.imul(h ^ (turn + 0x165667b1), 0x85ebca6b);
  h ^= h >>> 16;
  return MIN_SLEEP_MS + ((h >>> 0) % (MAX_SLEEP_MS - MIN_SLEEP_MS + 1));
}
