/**
 * Why and when a session's supervision ends, decided once, purely: the session supervisor
 * observes (the sandbox's exit, heartbeats, the turn's outcome, stop requests, the quota
 * watch, demand for its slot, the resident recycle policy), calls decideSupervision, and
 * acts on the decision. The decision's reason is a typed EndReason; the human account
 * travels beside it, and a turn that must be aborted carries its catalogue code.
 *
 * Every ending of a supervision is decided here, including those its store calls and its
 * own failures cause: a fenced call the store refused (the lease is someone else's), a
 * failure starting, binding or mounting the sandbox, and a commit after which the mode
 * gives the next turn a fresh sandbox.
 *
 * Stages: `before-work` (between turns, about to look for runnable messages: only a dead
 * sandbox, a stop request, a drain, a refusal or a failure ends it), `idle` (between turns,
 * nothing runnable) and `in-turn`.
 *
 * A drain (the worker leaving: a deploy, a scale-down) starts no new turn and lets the
 * running one end by itself until the drain's deadline; a turn still running then is
 * handed back as at a stop (`WORKER_STOPPING`: retried at once elsewhere, no try spent).
 */
import { decideSandboxHealth } from './decide.js';
import type { ErrorCode } from './errors.js';
import type { TurnOutcome } from './turn-in-flight.js';

export type EndReason =
  /** No work for idleTimeout. */
  | 'Idle'
  /** Claimed, but its messages were taken or not yet due: nothing to serve. */
  | 'NothingRunnable'
  /** The mode gives every turn a fresh sandbox (idleTimeout 0, or gVisor). */
  | 'SandboxPerTurn'
  /** Idle, and a queued session waits for a slot. */
  | 'SlotWanted'
  /** A resident sandbox due for replacement by its policy (between turns). */
  | 'Recycled'
  /** The runner aborted its own turn: its retry gets a fresh sandbox after backoff. */
  | 'TurnAborted'
  | 'SandboxExited'
  | 'HeartbeatTimeout'
  | 'TurnTimeout'
  | 'QuotaExceeded'
  /** The worker is stopping (a deploy, a restart), or its drain's grace ran out mid-turn. */
  | 'WorkerStopping'
  /** The worker is draining: the session is handed back between turns. */
  | 'Drained'
  /** Its user interrupted the running turn (POST /v1/sessions/:id/interrupt): the sandbox is killed, the turn's work discarded. */
  | 'Interrupted'
  /** The worker's lease is lapsing or its row is gone: it fences itself. */
  | 'LeaseLost'
  /** Starting, binding or mounting the sandbox failed. */
  | 'SupervisorFailed';

/** What becomes of the turn the supervision was serving when it ended. */
export interface TurnAbort {
  code: ErrorCode;
  error: string;
  /** When the sandbox died (its exit, or its last heartbeat), for the detection time. */
  diedAt?: number;
}

export interface Ending {
  reason: EndReason;
  message: string;
  /** Set when a running turn must be aborted in the store; null when none was running or it already ended. */
  abort: TurnAbort | null;
}

export type StopRequest = 'WorkerStopping' | 'LeaseLost';

export interface SupervisionSnapshot {
  stage: 'before-work' | 'idle' | 'in-turn';
  /** A fenced store call (recording the sandbox, starting a turn) was refused with this code: the lease is gone. */
  refused: string | null;
  /** Starting, binding or mounting the sandbox threw (its catalogue code; SANDBOX_FAILED without one). */
  failure: { code: ErrorCode; message: string } | null;
  /** A sandbox is bound to the session (idle only: none bound means the claim found nothing to serve). */
  bound: boolean;
  /** The turn being served (in-turn only). */
  turn: { startedAt: number; outcome: TurnOutcome | null } | null;
  exit: { exitCode: number | null; oomKilled: boolean; at: number } | null;
  stop: StopRequest | null;
  /** The worker is draining: no turn starts, and a running one is handed back at this time (epoch ms). */
  drainUntil: number | null;
  /** The store holds an interrupt request for the turn being served (in-turn only), since this time. */
  interruptRequestedAt: number | null;
  /** The quota watch found the workspace over its limit (in-turn only). */
  quotaExceeded: { code: ErrorCode; message: string } | null;
  lastHeartbeatAt: number;
  /** When the last turn ended (or the supervision began). */
  idleSince: number;
  /** Idle only: a queued session wants this slot (modes that give their slot up). */
  slotWanted: boolean;
  /** Idle only: why a resident sandbox is due for a recycle, or null. */
  recycleDue: string | null;
}

export interface SupervisionPolicy {
  heartbeatTimeoutMs: number;
  turnTimeoutMs: number;
  /** Infinity for a resident sandbox: it never idles out. */
  idleTimeoutMs: number;
  memoryMb: number;
  /** Why every turn gets a fresh sandbox (gVisor, idleTimeout 0), or null when a sandbox serves on after a commit. */
  freshSandboxPerTurn: string | null;
}

export type SupervisionDecision =
  | { action: 'end'; ending: Ending }
  | { action: 'wait'; forMs: number }
  | { action: 'look-for-work' }
  | { action: 'turn-committed' };

export function decideSupervision(
  s: SupervisionSnapshot,
  now: number,
  policy: SupervisionPolicy,
): SupervisionDecision {
  const inTurn = s.stage === 'in-turn';
  // The store refused a fenced call: nothing of ours can be written any more, not even an abort.
  if (s.refused) return end('LeaseLost', `lease lost (${s.refused})`, null);
  // A turn that ended counts first: a commit that raced the sandbox's exit is a commit. (A
  // failure comes before its turn is served or after it was handed back: it has no outcome.)
  if (inTurn && s.turn?.outcome && !s.failure) {
    if (s.turn.outcome.kind === 'aborted')
      return s.turn.outcome.code === 'TURN_INTERRUPTED'
        ? end('Interrupted', 'the turn was interrupted by its user', null)
        : end('TurnAborted', `the runner aborted the turn (${s.turn.outcome.code})`, null);
    // Self-fencing began while the commit went through: the committed layer is left to the session's next owner.
    if (s.stop === 'LeaseLost') return end('LeaseLost', 'lease lost as the turn committed', null);
    if (s.drainUntil !== null) return end('Drained', 'worker draining: the turn committed', null);
    return policy.freshSandboxPerTurn
      ? end('SandboxPerTurn', `a fresh sandbox for every turn (${policy.freshSandboxPerTurn})`, null)
      : { action: 'turn-committed' };
  }
  // Self-fencing kills the sandbox at once: an exit seen with it is the fence's own kill.
  if (s.stop === 'LeaseLost') return stopped('LeaseLost', inTurn);
  // Asked before anything else ended the turn: the store refuses its commit from now on, so
  // the abort below is its one outcome (an exit seen after it is the kill it asked for).
  if (inTurn && s.interruptRequestedAt !== null)
    return end('Interrupted', 'the turn was interrupted by its user', {
      code: 'TURN_INTERRUPTED',
      error: `Turn interrupted at its user's request (interrupt)`,
    });
  if (inTurn && s.quotaExceeded)
    return end('QuotaExceeded', s.quotaExceeded.message, {
      code: s.quotaExceeded.code,
      error: s.quotaExceeded.message,
    });
  if (s.exit) {
    const cause = s.exit.oomKilled ? 'out of memory' : `exit code ${s.exit.exitCode}`;
    const message = `sandbox exited (${cause})`;
    if (!inTurn) return end('SandboxExited', message, null);
    return s.exit.oomKilled
      ? end('SandboxExited', message, {
          code: 'SANDBOX_OUT_OF_MEMORY',
          error: `sandbox exited mid-turn, killed at its memory limit (${policy.memoryMb} MiB)`,
        })
      : end('SandboxExited', message, {
          code: 'SANDBOX_EXITED',
          error: `sandbox exited mid-turn (${cause})`,
          diedAt: s.exit.at,
        });
  }
  if (s.stop) return stopped(s.stop, inTurn);
  let drainLeftMs = Number.POSITIVE_INFINITY;
  if (s.drainUntil !== null && !s.failure) {
    if (!inTurn) return end('Drained', 'worker draining', null);
    drainLeftMs = s.drainUntil - now;
    if (drainLeftMs <= 0)
      return end('WorkerStopping', 'worker draining: the turn outlived the drain grace', {
        code: 'WORKER_STOPPING',
        error: 'worker stopped: the turn outlived its drain grace',
      });
  }
  // A failure is the ending only when nothing seen above explains it (a stop, an exit).
  if (s.failure)
    return end(
      'SupervisorFailed',
      s.failure.message,
      inTurn ? { code: s.failure.code, error: s.failure.message } : null,
    );
  if (s.stage === 'before-work') return { action: 'look-for-work' };
  let idleLeftMs = Number.POSITIVE_INFINITY;
  if (s.stage === 'idle') {
    if (!s.bound) return end('NothingRunnable', 'nothing runnable', null);
    idleLeftMs = policy.idleTimeoutMs - (now - s.idleSince);
    if (idleLeftMs <= 0) return end('Idle', `idle for ${now - s.idleSince} ms`, null);
    if (s.slotWanted) return end('SlotWanted', 'slot wanted by a queued session', null);
    if (s.recycleDue) return end('Recycled', `recycled: ${s.recycleDue}`, null);
  }
  const health = decideSandboxHealth(
    { lastHeartbeatAt: s.lastHeartbeatAt, turnStartedAt: inTurn ? (s.turn?.startedAt ?? null) : null },
    now,
    policy,
  );
  if (health.action === 'kill') {
    const heartbeat = health.reason === 'heartbeat-timeout';
    const message = `sandbox killed: ${health.reason} after ${health.ageMs} ms`;
    return end(
      heartbeat ? 'HeartbeatTimeout' : 'TurnTimeout',
      message,
      inTurn
        ? {
            code: heartbeat ? 'SANDBOX_UNRESPONSIVE' : 'TURN_TIMEOUT',
            error: message,
            ...(heartbeat ? { diedAt: s.lastHeartbeatAt } : {}),
          }
        : null,
    );
  }
  return { action: 'wait', forMs: Math.min(idleLeftMs, drainLeftMs, health.nextCheckInMs) };
}

function end(reason: EndReason, message: string, abort: TurnAbort | null): SupervisionDecision {
  return { action: 'end', ending: { reason, message, abort } };
}

function stopped(stop: StopRequest, inTurn: boolean): SupervisionDecision {
  const message = stop === 'LeaseLost' ? 'lease lost' : 'worker stopping';
  return end(
    stop,
    message,
    inTurn
      ? {
          code: stop === 'LeaseLost' ? 'WORKER_FENCED' : 'WORKER_STOPPING',
          error: `worker stopped: ${message}`,
        }
      : null,
  );
}
