/**
 * Where a resident workspace lives, and held sessions. A resident agent writes its
 * workspace in place on one data dir: the session row names that data dir (recorded under
 * the lease's fence before the sandbox can write, and again by each commit), so another
 * machine can tell it does not have the files. A turn that finds them missing is aborted
 * with a code that holds the session (turns.ts): its messages stay pending, the session
 * leaves the claim queue, and only an operator lets it go on — resumed as it is (the
 * workspace came back), or with its workspace reset (the loss accepted, recorded in the
 * audit log). Nothing here runs on its own: a held session never circles.
 */
import { BerthError, type ErrorCode, type SessionView } from '../../../core/index.js';
import type { Fence, FenceCode, ResidentCaptureCode, ResidentCaptureInput } from '../../store.js';
import { all, get, guarded, type Program, type Row, run, type Tx } from '../program.js';
import { sessionViewOf } from '../session-views.js';
import { ownedBy } from './agents.js';
import { audit } from './audit.js';
import { checkFence, fenceParams } from './fence.js';
import { sessionGuard } from './guards.js';
import { recomputeQueueKeys } from './queue-keys.js';
import { appendLayer, recordSnapshot } from './workspace.js';

/** This data dir takes the session's resident workspace (its marker is already written). */
export function* recordResidentHolder(
  tx: Tx,
  input: Fence & { holder: string; holderName: string },
  now: number,
): Program<FenceCode> {
  const code = yield* checkFence(input);
  if (code !== 'ok') return code;
  yield* guarded(
    tx,
    'RECORD_RESIDENT_HOLDER',
    { ...fenceParams(input), holder: input.holder, holderName: input.holderName, now },
    sessionGuard(input.sessionId, `leased by ${input.workerId} at generation ${input.generation}`),
  );
  return 'ok';
}

/** In a resident turn's commit (fenced by it): the holder it ran on wrote the workspace now. */
export function* recordResidentWrite(tx: Tx, sessionId: string, holder: string, now: number): Program<void> {
  yield* guarded(
    tx,
    'RECORD_RESIDENT_WRITE',
    { id: sessionId, holder, now },
    sessionGuard(sessionId, `with its resident workspace held by data dir ${holder}`),
  );
}

/**
 * The resident workspace captured at `version` (after its commit, or before the sandbox is
 * released): its object enters the chain as that version's layer (over the chain's tree as of
 * the last capture; no object when nothing changed) or, for a full capture, as its snapshot;
 * the session records the version. A version that has an object already (captured once, and
 * written since: a capture before a release) is moved on by one for it, compare-and-set, as
 * a rewind's is. Fenced: 'stale' when the lease moved on, 'moved' when the version or the
 * holder did (a capture of a tree the store no longer describes is not recorded).
 */
export function* recordResidentCapture(
  tx: Tx,
  input: ResidentCaptureInput,
  now: number,
): Program<ResidentCaptureCode> {
  const code = yield* checkFence(input);
  if (code !== 'ok') return { code };
  const { sessionId, holder, object } = input;
  const row = (yield* get('SESSION_BY_ID', { id: sessionId }))!;
  if (Number(row.workspace_version) !== input.version || row.resident_holder !== holder)
    return { code: 'moved' };
  let version = input.version;
  if (object && (yield* all('WORKSPACE_ROWS', { sessionId })).some((r) => Number(r.version) === version)) {
    yield* guarded(
      tx,
      'ADVANCE_WORKSPACE_VERSION',
      { id: sessionId, from: version, now },
      sessionGuard(sessionId, `at workspace version ${version}`),
    );
    version += 1;
  }
  yield* guarded(
    tx,
    'RECORD_RESIDENT_CAPTURE',
    { id: sessionId, version, holder, now },
    sessionGuard(sessionId, `at workspace version ${version}, held by data dir ${holder}`),
  );
  const entered = !object
    ? true
    : object.kind === 'layer'
      ? yield* appendLayer(sessionId, { version, ...object, turnId: input.turnId }, now)
      : yield* recordSnapshot({ sessionId, version, ...object }, now);
  if (!entered)
    throw new BerthError(
      'INTERNAL',
      `Session ${sessionId}'s chain holds an object of version ${version} already (${tx.operation})`,
    );
  return { code: 'ok', version };
}

/** The caller holds the session row (an abort): out of the queue until an operator acts. */
export function* holdSession(
  tx: Tx,
  sessionId: string,
  why: { code: ErrorCode; error: string },
  now: number,
): Program<void> {
  yield* guarded(
    tx,
    'HOLD_SESSION',
    { id: sessionId, code: why.code, error: why.error, now },
    sessionGuard(sessionId, 'present'),
  );
}

/**
 * An operator lets a held session go on: its messages are queued again in their order.
 * With `resetWorkspace` the loss of its resident workspace is accepted first: nobody holds
 * it, the next data dir to take it starts empty, and the audit log keeps what was given up.
 * Throws SESSION_NOT_FOUND, SESSION_NOT_HELD.
 */
export function* releaseHold(
  tx: Tx,
  input: { sessionId: string; resetWorkspace: boolean; now: number; tenant?: string },
  leaseMs: number,
): Program<SessionView> {
  const { sessionId, now } = input;
  const operation = input.resetWorkspace ? 'resetWorkspace' : 'resumeSession';
  const row = yield* get('SESSION_BY_ID', { id: sessionId });
  if (!row || !ownedBy(row, input.tenant))
    throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist (${operation})`);
  if ((yield* run('RELEASE_HOLD', { id: sessionId, now })) !== 1)
    throw new BerthError('SESSION_NOT_HELD', `Session ${sessionId} is not held (${operation})`);
  if (input.resetWorkspace) {
    yield* guarded(
      tx,
      'RESET_RESIDENT_WORKSPACE',
      { id: sessionId, now },
      sessionGuard(sessionId, 'present'),
    );
    yield* audit({ kind: 'workspace-reset', sessionId, data: givenUp(row) }, now);
  }
  yield* recomputeQueueKeys(tx, sessionId);
  tx.changes.push({
    type: 'enqueued',
    sessionId,
    leaseOwner: (row.lease_owner as string | null) ?? null,
  });
  return (yield* sessionViewOf(sessionId, now, leaseMs))!;
}

/** What a reset gives up, as the audit log keeps it. */
function givenUp(row: Row): Record<string, unknown> {
  return {
    holder: row.resident_holder ?? null,
    holderName: row.resident_holder_name ?? null,
    writtenAt: row.resident_written_at == null ? null : Number(row.resident_written_at),
    epoch: Number(row.resident_epoch),
    heldCode: row.held_code ?? null,
    heldError: row.held_error ?? null,
  };
}
