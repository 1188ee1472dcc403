/**
 * The chaos workload: what each turn of each session asks a `script` agent to do, and how
 * its turns are grouped into bursts. Pure.
 *
 * Turn k (1-based) of a session first checks that it starts from exactly the committed
 * result of turns 1..k-1 (log.txt and the `turns` state key), so a turn that sees a killed
 * attempt's partial writes fails an assert. It then appends `k:a`, sleeps, appends `k:b`
 * and records `turns = k`: a kill in the sleep leaves a half-written turn behind, which
 * must never become visible. Two turns in three leave a `tail -f` running in the
 * background: turn 3n with its output redirected, turn 3n+1 holding the job's output (the
 * `npm run dev &` case: the job must still end when its shell exits).
 *
 * A session's turns are sent in bursts of MIN_BURST to MAX_BURST (session-driver.ts): the
 * rest of a burst is sent while its first message's turn runs, so they queue behind it and
 * are taken together into one berth turn, where each sees the writes of the one before it.
 * The first turn of every burst after the first checks that no `tail` survived an earlier
 * turn: it is the only message whose berth turn is sure to hold no earlier message (every
 * earlier one was answered before it was sent), while a later message of a burst may share
 * its turn with the one before it, whose `tail` then rightly still runs.
 *
 * A long turn (`longTurnPlan`, `berth chaos --long-turns`) is the message of a model agent:
 * berth's own `anthropic` loop, against the run's scripted Messages API (scripted-model.ts),
 * which reads the plan from the message and answers call i with a `bash` tool call running
 * `appendCommand` of the plan's step i, then with the plan's reply. The plan's append steps
 * are thus what the committed tree must hold, as for a script turn: steps.txt with
 * `step-1` .. `step-LONG_TURN_STEPS`, each once, in order.
 *
 * Invariants:
 * - `turnPlan`, `expectedLog` and `burstSizes` are deterministic functions of their arguments.
 * - After turns 1..k committed exactly once each, log.txt is `expectedLog(k)` and state
 *   `turns` is k; before any turn the file and the key are absent.
 * - The sleep of a turn is in [MIN_SLEEP_MS, MAX_SLEEP_MS]; a burst has MIN_BURST to
 *   MAX_BURST turns, but the last, which may be cut short by the session's turn count.
 */
import type { ScriptPlan, ScriptStep } from '../core/index.js';

export const LOG_FILE = 'log.txt';
export const STATE_KEY = 'turns';
export const MIN_SLEEP_MS = 200;
export const MAX_SLEEP_MS = 900;
export const MIN_BURST = 2;
export const MAX_BURST = 5;
/** What the background-process check looks for; the checker scans host processes for it too. */
export const BACKGROUND_COMMAND = `tail -f ${LOG_FILE}`;
/** The step that fails when an earlier turn's background `tail` survived into this one. */
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
  if (turn > 1 && startsBurst(turn, opts.seed, sessionIndex)) steps.push({ run: STRAY_PROCESS_CHECK });
  steps.push({ append: { path: LOG_FILE, content: `${turn}:a\n` } });
  steps.push({ sleep: sleepMs(opts.seed, sessionIndex, turn) });
  const background = backgroundOf(turn);
  if (background !== null) steps.push({ run: background });
  steps.push({ append: { path: LOG_FILE, content: `${turn}:b\n` } });
  steps.push({ putState: { key: STATE_KEY, value: turn } });
  return { steps, reply: expectedReply(opts.session, turn) };
}

export const STEPS_FILE = 'steps.txt';
/** Tool calls of one long turn, each writing one line; its model calls are one more (the reply). */
export const LONG_TURN_STEPS = 20;

/** The plan of long turn `turn` of a session: one append of `step-<i>` per tool call, then its reply. */
export function longTurnPlan(session: string, turn: number): ScriptPlan {
  const steps: ScriptStep[] = Array.from({ length: LONG_TURN_STEPS }, (_, i) => ({
    append: { path: STEPS_FILE, content: `step-${i + 1}\n` },
  }));
  return { steps, reply: expectedReply(session, turn) };
}

/** The shell command a model's tool call runs to do an append step (the step's path is relative to the workspace). */
export function appendCommand(step: { append: { path: string; content: string } }): string {
  return `printf %s ${shellQuoted(step.append.content)} >> ${shellQuoted(step.append.path)}`;
}

function shellQuoted(s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`;
}

/** The session and turn a reply (expectedReply) names; null when it is not one. */
export function replyOwner(reply: string): { session: string; turn: number } | null {
  const colon = reply.lastIndexOf(':');
  const turn = Number(reply.slice(colon + 1));
  return colon > 0 && Number.isInteger(turn) && turn >= 1 ? { session: reply.slice(0, colon), turn } : null;
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

/** The reply of turn `turn` of a session: its identity in the workload's terms. */
export function expectedReply(session: string, turn: number): string {
  return `${session}:${turn}`;
}

/** The plan a message's text holds; null when it holds none (not JSON). */
export function readPlan(text: string): ScriptPlan | null {
  try {
    return JSON.parse(text) as ScriptPlan;
  } catch {
    return null;
  }
}

/** Deterministic in [MIN_SLEEP_MS, MAX_SLEEP_MS]: a hash of (seed, session, turn). */
export function sleepMs(seed: number, sessionIndex: number, turn: number): number {
  return MIN_SLEEP_MS + (hash32(seed, sessionIndex, turn) % (MAX_SLEEP_MS - MIN_SLEEP_MS + 1));
}

/** The sizes of a session's bursts, in order, for `turns` turns: they add up to `turns`. */
export function burstSizes(turns: number, seed: number, sessionIndex: number): number[] {
  const sizes: number[] = [];
  for (let left = turns, burst = 0; left > 0; burst++) {
    const size = Math.min(left, burstSize(seed, sessionIndex, burst));
    sizes.push(size);
    left -= size;
  }
  return sizes;
}

/** Whether turn `turn` is the first of its burst (whatever the session's turn count). */
export function startsBurst(turn: number, seed: number, sessionIndex: number): boolean {
  let first = 1;
  for (let burst = 0; first < turn; burst++) first += burstSize(seed, sessionIndex, burst);
  return first === turn;
}

/** Deterministic in [MIN_BURST, MAX_BURST]; salted so that it does not follow the sleeps. */
function burstSize(seed: number, sessionIndex: number, burst: number): number {
  return MIN_BURST + (hash32(seed ^ BURST_SALT, sessionIndex, burst) % (MAX_BURST - MIN_BURST + 1));
}

const BURST_SALT = 0x5bd1e995;

/** A 32-bit unsigned integer hash of (seed, session, n). */
function hash32(seed: number, sessionIndex: number, n: number): number {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b);
  h = Math.imul(h ^ (sessionIndex + 0x27d4eb2f), 0xc2b2ae35);
  h = Math.imul(h ^ (n + 0x165667b1), 0x85ebca6b);
  // murmur3's finaliser: every input bit reaches the low bits a small modulus keeps.
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
