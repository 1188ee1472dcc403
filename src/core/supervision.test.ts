/** decideSupervision, case by case from a fixed BASE time: when a supervision ends, why, and what its turn becomes. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ErrorCode } from './errors.js';
import {
  decideSupervision,
  type EndReason,
  type SupervisionDecision,
  type SupervisionSnapshot,
  type TurnAbort,
} from './supervision.js';

const BASE = 1_800_000_000_000;
const POLICY = {
  heartbeatTimeoutMs: 30_000,
  turnTimeoutMs: 600_000,
  idleTimeoutMs: 30_000,
  memoryMb: 512,
  freshSandboxPerTurn: null as string | null,
};
const QUIET: SupervisionSnapshot = {
  stage: 'idle',
  refused: null,
  failure: null,
  bound: true,
  turn: null,
  exit: null,
  stop: null,
  drainUntil: null,
  quotaExceeded: null,
  interruptRequestedAt: null,
  lastHeartbeatAt: BASE - 1000,
  idleSince: BASE - 10_000,
  slotWanted: false,
  recycleDue: null,
};
const inTurn = (p: Partial<SupervisionSnapshot> = {}): SupervisionSnapshot => ({
  ...QUIET,
  stage: 'in-turn',
  turn: { startedAt: BASE - 5000, outcome: null },
  ...p,
});
/** The turn's abort is in the store already (the runner's, or the gateway's for it). */
const abortedByItsRunner = (code: ErrorCode, error: string): SupervisionSnapshot =>
  inTurn({ turn: { startedAt: BASE - 5000, outcome: { kind: 'aborted', code, error } } });
const exited = { exitCode: 137, oomKilled: false, at: BASE - 200 };

const ended = (reason: EndReason, message: string, abort: TurnAbort | null): SupervisionDecision => ({
  action: 'end',
  ending: { reason, message, abort },
});
const EXITED_MID_TURN = ended('SandboxExited', 'sandbox exited (exit code 137)', {
  code: 'SANDBOX_EXITED',
  error: 'sandbox exited mid-turn (exit code 137)',
  diedAt: BASE - 200,
});
const FENCED = ended('LeaseLost', 'lease lost', {
  code: 'WORKER_FENCED',
  error: 'worker stopped: lease lost',
});
const INTERRUPTED = ended('Interrupted', 'the turn was interrupted by its user', {
  code: 'TURN_INTERRUPTED',
  error: "Turn interrupted at its user's request (interrupt)",
});

test('decideSupervision: each snapshot, its decision', () => {
  const cases: {
    name: string;
    s: SupervisionSnapshot;
    policy?: Partial<typeof POLICY>;
    expected: SupervisionDecision;
  }[] = [
    {
      name: 'about to look for work',
      s: { ...QUIET, stage: 'before-work' },
      expected: { action: 'look-for-work' },
    },
    {
      name: 'idle, not for long: wait for the idle deadline',
      s: QUIET,
      expected: { action: 'wait', forMs: 20_000 },
    },
    {
      name: 'idle past the timeout',
      s: { ...QUIET, idleSince: BASE - 30_000 },
      expected: { action: 'end', ending: { reason: 'Idle', message: 'idle for 30000 ms', abort: null } },
    },
    {
      name: 'resident: never idles out; the heartbeat sets the next check',
      s: { ...QUIET, idleSince: BASE - 3_600_000 },
      policy: { idleTimeoutMs: Number.POSITIVE_INFINITY },
      expected: { action: 'wait', forMs: 29_000 },
    },
    {
      name: 'a queued session wants the slot',
      s: { ...QUIET, slotWanted: true },
      expected: {
        action: 'end',
        ending: { reason: 'SlotWanted', message: 'slot wanted by a queued session', abort: null },
      },
    },
    {
      name: 'resident recycle due',
      s: { ...QUIET, recycleDue: 'recycle requested' },
      expected: {
        action: 'end',
        ending: { reason: 'Recycled', message: 'recycled: recycle requested', abort: null },
      },
    },
    {
      name: 'between turns the sandbox exits: nothing to abort',
      s: { ...QUIET, stage: 'before-work', exit: exited },
      expected: {
        action: 'end',
        ending: { reason: 'SandboxExited', message: 'sandbox exited (exit code 137)', abort: null },
      },
    },
    {
      name: 'mid-turn exit: the turn is aborted with SANDBOX_EXITED, detection from the exit',
      s: inTurn({ exit: exited }),
      expected: EXITED_MID_TURN,
    },
    {
      name: 'mid-turn OOM kill: terminal SANDBOX_OUT_OF_MEMORY',
      s: inTurn({ exit: { ...exited, oomKilled: true } }),
      expected: {
        action: 'end',
        ending: {
          reason: 'SandboxExited',
          message: 'sandbox exited (out of memory)',
          abort: {
            code: 'SANDBOX_OUT_OF_MEMORY',
            error: 'sandbox exited mid-turn, killed at its memory limit (512 MiB)',
          },
        },
      },
    },
    {
      name: 'a commit that raced the exit is a commit',
      s: inTurn({ exit: exited, turn: { startedAt: BASE - 5000, outcome: { kind: 'committed' } } }),
      expected: { action: 'turn-committed' },
    },
    {
      name: 'the runner aborted its turn: nothing more to abort',
      s: abortedByItsRunner('TURN_FAILED', 'step 1 (run) failed'),
      expected: {
        action: 'end',
        ending: { reason: 'TurnAborted', message: 'the runner aborted the turn (TURN_FAILED)', abort: null },
      },
    },
    {
      name: 'interrupt requested mid-turn: the sandbox is killed, the turn aborted with TURN_INTERRUPTED',
      s: inTurn({ interruptRequestedAt: BASE - 100 }),
      expected: INTERRUPTED,
    },
    {
      name: 'interrupt requested, and the sandbox exited since (its kill): the interrupt, not the exit',
      s: inTurn({ interruptRequestedAt: BASE - 100, exit: exited }),
      expected: INTERRUPTED,
    },
    {
      name: 'a commit the store took before the interrupt request is a commit',
      s: inTurn({
        interruptRequestedAt: BASE - 100,
        turn: { startedAt: BASE - 5000, outcome: { kind: 'committed' } },
      }),
      expected: { action: 'turn-committed' },
    },
    {
      name: 'the gateway aborted a commit the interrupt refused: Interrupted, nothing more to abort',
      s: abortedByItsRunner('TURN_INTERRUPTED', 'asked to stop'),
      expected: {
        action: 'end',
        ending: { reason: 'Interrupted', message: 'the turn was interrupted by its user', abort: null },
      },
    },
    {
      name: 'over the quota mid-turn: terminal, with the watch code',
      s: inTurn({ quotaExceeded: { code: 'WORKSPACE_QUOTA_EXCEEDED', message: 'over 32 MiB' } }),
      expected: {
        action: 'end',
        ending: {
          reason: 'QuotaExceeded',
          message: 'over 32 MiB',
          abort: { code: 'WORKSPACE_QUOTA_EXCEEDED', error: 'over 32 MiB' },
        },
      },
    },
    {
      name: 'the worker stops mid-turn: WORKER_STOPPING (costs no try)',
      s: inTurn({ stop: 'WorkerStopping' }),
      expected: {
        action: 'end',
        ending: {
          reason: 'WorkerStopping',
          message: 'worker stopping',
          abort: { code: 'WORKER_STOPPING', error: 'worker stopped: worker stopping' },
        },
      },
    },
    {
      name: 'draining mid-turn, before the grace ends: the turn runs on, checked again at the deadline at the latest',
      s: inTurn({ drainUntil: BASE + 3000 }),
      expected: { action: 'wait', forMs: 3000 },
    },
    {
      name: 'draining, the turn committed: the session is handed back, not served on',
      s: inTurn({
        drainUntil: BASE + 3000,
        turn: { startedAt: BASE - 5000, outcome: { kind: 'committed' } },
      }),
      expected: {
        action: 'end',
        ending: { reason: 'Drained', message: 'worker draining: the turn committed', abort: null },
      },
    },
    {
      name: 'draining, the turn outlived the grace: handed back as at a stop (WORKER_STOPPING, no try spent)',
      s: inTurn({ drainUntil: BASE }),
      expected: {
        action: 'end',
        ending: {
          reason: 'WorkerStopping',
          message: 'worker draining: the turn outlived the drain grace',
          abort: { code: 'WORKER_STOPPING', error: 'worker stopped: the turn outlived its drain grace' },
        },
      },
    },
    {
      name: 'draining between turns: no new turn starts, the session is handed back',
      s: { ...QUIET, stage: 'before-work', drainUntil: BASE + 3000 },
      expected: { action: 'end', ending: { reason: 'Drained', message: 'worker draining', abort: null } },
    },
    {
      name: 'draining, the sandbox died mid-turn: the exit, as without a drain',
      s: inTurn({ drainUntil: BASE + 3000, exit: exited }),
      expected: EXITED_MID_TURN,
    },
    {
      name: 'the lease lapses mid-turn: the worker fences itself',
      s: inTurn({ stop: 'LeaseLost' }),
      expected: FENCED,
    },
    {
      name: 'the exit of a sandbox the fence killed: the fence, not the exit',
      s: inTurn({ stop: 'LeaseLost', exit: exited }),
      expected: FENCED,
    },
    {
      name: 'silent sandbox mid-turn: SANDBOX_UNRESPONSIVE, detection from its last heartbeat',
      s: inTurn({ lastHeartbeatAt: BASE - 30_000 }),
      expected: {
        action: 'end',
        ending: {
          reason: 'HeartbeatTimeout',
          message: 'sandbox killed: heartbeat-timeout after 30000 ms',
          abort: {
            code: 'SANDBOX_UNRESPONSIVE',
            error: 'sandbox killed: heartbeat-timeout after 30000 ms',
            diedAt: BASE - 30_000,
          },
        },
      },
    },
    {
      name: 'turn past its deadline: TURN_TIMEOUT',
      s: inTurn({ turn: { startedAt: BASE - 600_000, outcome: null } }),
      expected: {
        action: 'end',
        ending: {
          reason: 'TurnTimeout',
          message: 'sandbox killed: turn-timeout after 600000 ms',
          abort: { code: 'TURN_TIMEOUT', error: 'sandbox killed: turn-timeout after 600000 ms' },
        },
      },
    },
    {
      name: 'a healthy turn: wait for the next heartbeat deadline',
      s: inTurn(),
      expected: { action: 'wait', forMs: 29_000 },
    },
    {
      name: 'the store refused a fenced call: the lease is gone, and nothing of ours can be aborted',
      s: { ...QUIET, stage: 'before-work', refused: 'stale' },
      expected: {
        action: 'end',
        ending: { reason: 'LeaseLost', message: 'lease lost (stale)', abort: null },
      },
    },
    {
      name: 'claimed, nothing runnable, no sandbox bound',
      s: { ...QUIET, bound: false },
      expected: {
        action: 'end',
        ending: { reason: 'NothingRunnable', message: 'nothing runnable', abort: null },
      },
    },
    {
      name: 'committed while self-fencing: the layer is left to the next owner',
      s: inTurn({ turn: { startedAt: BASE - 5000, outcome: { kind: 'committed' } }, stop: 'LeaseLost' }),
      expected: {
        action: 'end',
        ending: { reason: 'LeaseLost', message: 'lease lost as the turn committed', abort: null },
      },
    },
    {
      name: 'committed, and the mode gives every turn a fresh sandbox',
      s: inTurn({ turn: { startedAt: BASE - 5000, outcome: { kind: 'committed' } } }),
      policy: { freshSandboxPerTurn: 'gVisor' },
      expected: {
        action: 'end',
        ending: { reason: 'SandboxPerTurn', message: 'a fresh sandbox for every turn (gVisor)', abort: null },
      },
    },
    {
      name: 'starting the sandbox failed mid-turn: the turn is aborted with the failure’s own code',
      s: inTurn({ turn: null, failure: { code: 'MOUNT_NOT_ALLOWED', message: 'not in the allowlist' } }),
      expected: {
        action: 'end',
        ending: {
          reason: 'SupervisorFailed',
          message: 'not in the allowlist',
          abort: { code: 'MOUNT_NOT_ALLOWED', error: 'not in the allowlist' },
        },
      },
    },
    {
      name: 'a failure before any turn: nothing to abort',
      s: { ...QUIET, stage: 'before-work', failure: { code: 'SANDBOX_FAILED', message: 'boom' } },
      expected: { action: 'end', ending: { reason: 'SupervisorFailed', message: 'boom', abort: null } },
    },
    {
      name: 'a failure that a stop explains: the stop is the ending',
      s: inTurn({ turn: null, stop: 'WorkerStopping', failure: { code: 'SANDBOX_FAILED', message: 'boom' } }),
      expected: {
        action: 'end',
        ending: {
          reason: 'WorkerStopping',
          message: 'worker stopping',
          abort: { code: 'WORKER_STOPPING', error: 'worker stopped: worker stopping' },
        },
      },
    },
  ];
  for (const c of cases)
    assert.deepEqual(decideSupervision(c.s, BASE, { ...POLICY, ...c.policy }), c.expected, c.name);
});
