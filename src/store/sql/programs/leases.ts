/**
 * Leases: the claim (compare-and-set of the queue's first session to a new generation, its
 * tenant charged for it in the fair share in the same transaction), the sweep of dead
 * holders' leases, the sandbox record and the release. Every program locks the session row
 * first (FAIR_QUEUE_HEAD or QUEUE_HEAD, DEAD_HELD_QUEUE_HEAD, EXPIRED_LEASES_LOCKED, FENCE)
 * and re-reads what it decides on under that lock, so PostgreSQL's concurrent
 * transactions decide as SQLite's serial ones do, and each guarded statement matches the
 * row it read. Every lease holder has a worker row (a worker claims only while its row is
 * fresh, and its clean stop leaves the row expired while it still holds leases), so dead
 * leases are found from the stale rows, never by reading every leased session.
 */
import type { ClaimedSession, RetryPolicy } from '../../../core/index.js';
import type { Fence, FenceCode } from '../../store.js';
import { fairClaimOrder } from '../fair-order.js';
import { all, get, guarded, type Program, type Row, run, type Tx } from '../program.js';
import { toAgent, toQueuedSession, toSession, toShares } from '../rows.js';
import { checkFence, fenceParams } from './fence.js';
import { sessionGuard } from './guards.js';
import { abortRunningTurn } from './turns.js';

export interface LeasePolicy {
  /** A lease holder whose worker row is older than this is dead. */
  leaseMs: number;
  /** Applied to the messages of the turns a reclaim aborts. */
  retry: RetryPolicy;
}

export function* claimRunnableSession(
  tx: Tx,
  workerId: string,
  now: number,
  policy: LeasePolicy,
): Program<ClaimedSession | null> {
  const staleBefore = now - policy.leaseMs;
  if (!(yield* get('FRESH_WORKER', { id: workerId, staleBefore }))) return null;
  // The queue's head is the first of two heads: the free sessions' (the fair share's pick;
  // FIFO when every session of the picked tenant is being claimed by others) and the dead
  // holders' (rare, found from their stale rows). Both stay locked until this transaction ends.
  const fair = yield* get('FAIR_QUEUE_HEAD', { now });
  const free = fair ?? (yield* get('QUEUE_HEAD', { now }));
  const dead = yield* get('DEAD_HELD_QUEUE_HEAD', { now, staleBefore });
  const pick =
    fair && !dead
      ? { head: fair, virtualTime: Number(fair.virtual_time), shared: Number(fair.contenders) > 1 }
      : yield* firstOf(free, dead);
  if (!pick) return null;
  const { head, virtualTime, shared } = pick;
  const id = String(head.session_id);
  const lease = (yield* get('SESSION_LEASE', { id, staleBefore }))!;
  // Taken by a live worker since the queue was read (PostgreSQL): not ours to take.
  if (lease.lease_owner !== null && Number(lease.holder_alive) === 1) return null;
  if (lease.lease_owner !== null) yield* reclaimSession(tx, id, now, policy);
  const row = (yield* get('SESSION_BY_ID', { id }))!;
  // A reclaimed holder's turn went back to pending, with backoff: it holds the session's later messages.
  if (lease.lease_owner !== null && (row.queued_id == null || Number(row.runnable_at) > now)) return null;
  const generation = Number(row.generation);
  yield* guarded(
    tx,
    'CLAIM_SESSION',
    { id, generation, worker: workerId, now },
    sessionGuard(id, `at generation ${generation}`),
  );
  const session = toSession((yield* get('SESSION_BY_ID', { id }))!);
  const agent = toAgent((yield* get('AGENT_BY_NAME', { name: session.agent }))!);
  // Last, as it locks the tenant's row until the commit (PostgreSQL): the tenant's other claims
  // wait for it. A tenant alone in the queue is not charged: nobody's share is at stake, and
  // its claims then run side by side as before.
  if (shared) yield* run('CHARGE_TENANT_SHARE', { tenant: session.tenant, virtualTime });
  return { session, agent };
}

/**
 * The one of two queue heads that claims take first, in the fair share, with the virtual time
 * it was read at (rare: a dead holder's session is queued, or the fair pick was all taken).
 */
function* firstOf(
  free: Row | undefined,
  dead: Row | undefined,
): Program<{ head: Row; virtualTime: number; shared: boolean } | null> {
  const heads = [free, dead].filter((r): r is Row => r !== undefined);
  if (heads.length === 0) return null;
  const shares = toShares(yield* all('TENANT_SHARES', {}));
  const [first] = fairClaimOrder(heads.map(toQueuedSession), shares);
  return {
    head: heads.find((r) => String(r.session_id) === first!.sessionId)!,
    virtualTime: shares.virtualTime,
    shared: true,
  };
}

/** Whether reclaimExpiredLeases has anything to do now (SWEEP_DUE), given the caller's last check that found nothing. */
export function* sweepDue(now: number, leaseMs: number, checkedUpTo: number): Program<boolean> {
  const due = yield* get('SWEEP_DUE', {
    checkedUpTo,
    staleBefore: now - leaseMs,
    deadBefore: now - 10 * leaseMs,
  });
  return due !== undefined;
}

/**
 * Up to `limit` sessions whose holder is dead: each one's running turn aborted, its lease
 * cleared; then long-dead worker rows. `more`: the batch was full, others may be left.
 */
export function* reclaimExpiredLeases(
  tx: Tx,
  now: number,
  policy: LeasePolicy,
  limit: number,
): Program<{ reclaimed: string[]; more: boolean }> {
  const reclaimed: string[] = [];
  const expired = yield* all('EXPIRED_LEASES_LOCKED', { staleBefore: now - policy.leaseMs, limit });
  for (const { id } of expired) {
    if (yield* reclaimSession(tx, String(id), now, policy)) reclaimed.push(String(id));
  }
  // Their sessions are reclaimed: rows of long-dead workers only clutter `berth status`.
  yield* run('DELETE_DEAD_WORKERS', { deadBefore: now - 10 * policy.leaseMs });
  return { reclaimed, more: expired.length === limit };
}

/**
 * The lease holder is dead: its running turn is aborted and the lease cleared, before
 * anyone else binds. The session row is locked by the caller; false when, re-read under
 * that lock, its holder turned out alive (or gone) after all.
 */
function* reclaimSession(tx: Tx, sessionId: string, now: number, policy: LeasePolicy): Program<boolean> {
  const lease = yield* get('SESSION_LEASE', { id: sessionId, staleBefore: now - policy.leaseMs });
  if (!lease || lease.lease_owner === null || Number(lease.holder_alive) === 1) return false;
  const holder = String(lease.lease_owner);
  const running = yield* get('RUNNING_TURN_OF_SESSION', { sessionId });
  if (running)
    yield* abortRunningTurn(
      tx,
      {
        sessionId,
        turnId: String(running.id),
        code: 'LEASE_EXPIRED',
        error: `Worker ${holder} stopped renewing its lease (reclaimExpiredLeases)`,
      },
      now,
      policy.retry,
    );
  yield* guarded(
    tx,
    'CLEAR_LEASE',
    { id: sessionId, holder, now },
    sessionGuard(sessionId, `leased by ${holder}`),
  );
  tx.changes.push({ type: 'released', sessionId });
  return true;
}

export function* recordSandbox(tx: Tx, fence: Fence, sandbox: string, now: number): Program<FenceCode> {
  const code = yield* checkFence(fence);
  if (code !== 'ok') return code;
  yield* guarded(
    tx,
    'RECORD_SANDBOX',
    { ...fenceParams(fence), sandbox, now },
    sessionGuard(fence.sessionId, `leased by ${fence.workerId} at generation ${fence.generation}`),
  );
  return 'ok';
}

export function* releaseSession(tx: Tx, fence: Fence, now: number): Program<FenceCode> {
  const code = yield* checkFence(fence);
  if (code !== 'ok') return code;
  yield* guarded(
    tx,
    'RELEASE_SESSION',
    { ...fenceParams(fence), now },
    sessionGuard(fence.sessionId, `leased by ${fence.workerId} at generation ${fence.generation}`),
  );
  tx.changes.push({ type: 'released', sessionId: fence.sessionId });
  return 'ok';
}

export function* nextProcessAfter(now: number): Program<number | null> {
  const row = yield* get('NEXT_PROCESS_AFTER', { now });
  return row?.at == null ? null : Number(row.at);
}
