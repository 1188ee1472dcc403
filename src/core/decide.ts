/**
 * Pure deciders: each takes a snapshot and `now` and returns what to do. The loops in
 * worker/ observe, call one of these, and act on the result.
 */

import { backoffMs } from './backoff.js';
import { abortPolicyOf, type ErrorCode } from './errors.js';

export interface RetryPolicy {
  retryBaseMs: number;
  retryMaxMs: number;
  maxTries: number;
}

export type AbortedMessageDecision =
  | { action: 'retry'; processAfter: number; delayMs: number }
  | { action: 'requeue' }
  | { action: 'hold' }
  | { action: 'interrupt' }
  | { action: 'fail' };

/**
 * A message whose turn was aborted after `tries` tries goes back to pending with backoff,
 * or is failed; the abort's code decides, through the catalogue. A code that costs no try
 * (the worker was asked to stop: not the turn's fault) requeues it at once and gives the
 * try back. A terminal code (a sandbox limit the turn hit, which a retry would hit again)
 * fails it at once. A code that lost the sandbox (killed or crashed mid-turn) retries the
 * first time at once: backoff protects against work that keeps failing, and one lost
 * sandbox is no sign of that. A code that holds the session (its resident workspace is
 * lost) keeps the message pending, its try given back, until an operator acts: no retry can cure it,
 * and failing it would lose it. A code that interrupts (its user stopped the turn) ends it
 * `interrupted` whatever its tries: the user asked for it not to run, so no try is spent
 * on a backoff and nothing is retried.
 */
export function decideAbortedMessage(
  tries: number,
  now: number,
  policy: RetryPolicy,
  code: ErrorCode,
): AbortedMessageDecision {
  const { retryable, costsTry, holdsSession, lostSandbox, interrupts } = abortPolicyOf(code);
  if (interrupts) return { action: 'interrupt' };
  // Checked first: such a code is not retryable, yet failing the message would lose it.
  if (holdsSession) return { action: 'hold' };
  if (!retryable) return { action: 'fail' };
  if (!costsTry) return { action: 'requeue' };
  if (tries >= policy.maxTries) return { action: 'fail' };
  // A lost sandbox says nothing against the work: its first retry waits for nothing.
  const failures = lostSandbox ? tries - 1 : tries;
  const delayMs =
    failures < 1 ? 0 : backoffMs(failures, { firstMs: policy.retryBaseMs, maxMs: policy.retryMaxMs });
  return { action: 'retry', processAfter: now + delayMs, delayMs };
}

/**
 * The messages the session's next turn takes, from its pending inbound messages (oldest
 * first): none while the oldest is not due, since a message in backoff holds every message
 * after it (a later message's turn never starts before an earlier one committed or was given
 * up). Otherwise the oldest and the messages right after it that have been tried as often:
 * fresh messages go together, and a retried turn's messages are retried on their own, so a
 * message that keeps failing costs the ones behind it no tries and, once failed, lets them go.
 */
export function nextBatch<M extends { processAfter: number; tries: number }>(pending: M[], now: number): M[] {
  const [oldest] = pending;
  if (!oldest || oldest.processAfter > now) return [];
  const batch = [oldest];
  for (const m of pending.slice(1)) {
    if (m.tries !== oldest.tries) break;
    batch.push(m);
  }
  return batch;
}

export interface SandboxSnapshot {
  lastHeartbeatAt: number;
  turnStartedAt: number | null;
}

export type SandboxHealthDecision =
  | { action: 'ok'; nextCheckInMs: number }
  | { action: 'kill'; reason: 'heartbeat-timeout' | 'turn-timeout'; ageMs: number };

/** Kills a sandbox that stopped heartbeating, or whose turn ran past its deadline. */
export function decideSandboxHealth(
  s: SandboxSnapshot,
  now: number,
  limits: { heartbeatTimeoutMs: number; turnTimeoutMs: number },
): SandboxHealthDecision {
  const heartbeatAgeMs = now - s.lastHeartbeatAt;
  if (heartbeatAgeMs >= limits.heartbeatTimeoutMs) {
    return { action: 'kill', reason: 'heartbeat-timeout', ageMs: heartbeatAgeMs };
  }
  let nextCheckInMs = limits.heartbeatTimeoutMs - heartbeatAgeMs;
  if (s.turnStartedAt !== null) {
    const turnAgeMs = now - s.turnStartedAt;
    if (turnAgeMs >= limits.turnTimeoutMs)
      return { action: 'kill', reason: 'turn-timeout', ageMs: turnAgeMs };
    nextCheckInMs = Math.min(nextCheckInMs, limits.turnTimeoutMs - turnAgeMs);
  }
  return { action: 'ok', nextCheckInMs };
}

/** Whether a worker row is still alive: its heartbeat is younger than the lease. */
export function isLeaseFresh(heartbeatAt: number, now: number, leaseMs: number): boolean {
  return now - heartbeatAt < leaseMs;
}

/**
 * What a worker's own lease allows, by its row's age as the store holds it: everything while
 * young; no new claim once two renewals (of one every fifth of a lease) are missed, since a
 * turn started then would likely die with the fence; at 0.6 of a lease, self-fencing (its
 * sandboxes killed), so they are dead before anyone else may take its sessions, at a lease.
 */
export type OwnLeaseDecision = 'ok' | 'no-claims' | 'fence';

/** The share of a lease after the last renewal at which a worker stops claiming, and at which it fences itself. */
export const OWN_LEASE_NO_CLAIMS_AT = 0.4;
export const OWN_LEASE_FENCE_AT = 0.6;

export function decideOwnLease(heartbeatAt: number, now: number, leaseMs: number): OwnLeaseDecision {
  const ageMs = now - heartbeatAt;
  if (ageMs >= leaseMs * OWN_LEASE_FENCE_AT) return 'fence';
  if (ageMs >= leaseMs * OWN_LEASE_NO_CLAIMS_AT) return 'no-claims';
  return 'ok';
}

/**
 * How many warm sandboxes to keep for one profile: as many as were taken (or wanted) in
 * the last minute, at least `min` while the profile is in use, never more than `max`.
 */
export function decideWarmPoolTarget(p: {
  recentTakes: number;
  inUse: boolean;
  min: number;
  max: number;
}): number {
  return Math.max(0, Math.min(p.max, Math.max(p.inUse ? p.min : 0, p.recentTakes)));
}

export type LeftoverLayerDecision = 'keep' | 'promote' | 'discard';

/**
 * What a worker's clean-up does with an attempt layer on disk that no supervisor of its own
 * uses. `turn` is read before `session`: a session's pendingLayer names a turn only from
 * that turn's commit until its promotion is complete, so a layer it names is committed.
 * A running turn whose fence (generation, lease owner) still holds may yet commit, even if
 * its worker looks dead (a stale heartbeat is also what a store outage looks like): its
 * layer is kept. Fences only move forward, so a broken one means the turn can never commit.
 */
export function decideLeftoverLayer(
  turnId: string,
  turn: { status: string; generation: number; workerId: string } | null,
  session: { pendingLayer: string | null; generation: number; leaseOwner: string | null } | null,
  isLiveWorker: (workerId: string) => boolean,
): LeftoverLayerDecision {
  if (session?.pendingLayer === turnId) {
    // Its owner promotes it; if the owner is gone, whoever cleans up does (a second run of a plan is harmless).
    return session.leaseOwner !== null && isLiveWorker(session.leaseOwner) ? 'keep' : 'promote';
  }
  const mayCommit =
    turn?.status === 'running' &&
    session?.generation === turn.generation &&
    session.leaseOwner === turn.workerId;
  return mayCommit ? 'keep' : 'discard';
}

export interface ResidentSnapshot {
  startedAt: number;
  /** What the runner last reported for all the sandbox's processes; null before its first report. */
  usage: { rssBytes: number; openFiles: number } | null;
  /** Latest operator request to recycle this session's sandbox (0 = none). */
  recycleRequestedAt: number;
}

/**
 * Whether a resident sandbox is replaced now. Asked only between turns, so a recycle
 * never cuts a turn: everything it committed is in state, storage or the workspace.
 * A request made before this sandbox started was for an earlier one.
 */
export function decideResidentRecycle(
  s: ResidentSnapshot,
  now: number,
  policy: { maxAgeMs?: number; maxRssMb?: number; maxOpenFiles?: number },
): { recycle: false } | { recycle: true; reason: string } {
  if (s.recycleRequestedAt > s.startedAt) return { recycle: true, reason: 'recycle requested' };
  if (policy.maxAgeMs !== undefined && now - s.startedAt >= policy.maxAgeMs)
    return { recycle: true, reason: `older than ${policy.maxAgeMs} ms` };
  if (s.usage && policy.maxRssMb !== undefined && s.usage.rssBytes > policy.maxRssMb * 2 ** 20)
    return {
      recycle: true,
      reason: `resident set ${Math.round(s.usage.rssBytes / 2 ** 20)} MiB over ${policy.maxRssMb} MiB`,
    };
  if (s.usage && policy.maxOpenFiles !== undefined && s.usage.openFiles > policy.maxOpenFiles)
    return { recycle: true, reason: `${s.usage.openFiles} open files over ${policy.maxOpenFiles}` };
  return { recycle: false };
}
