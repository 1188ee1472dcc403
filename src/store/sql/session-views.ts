/**
 * What a client sees of sessions (status, queue position, last reply), and the counts the
 * store keeps of them, read from either SQL store. One session's view costs a few index
 * lookups and, while it is queued, a count of each tenant's part of the queue (its place in
 * the fair share depends on all of them); a listing reads each kind of fact for all its
 * page's sessions at once (a constant number of statements, not a few per session).
 */
import { BY_CREATION, type PageRequest, type SessionCounts, type SessionView } from '../../core/index.js';
import { deriveSessionStatus } from '../session-status.js';
import { fairClaimOrder, fairPosition, type Shares } from './fair-order.js';
import { pageParams } from './keyset.js';
import { all, get, type Program, type Row } from './program.js';
import { toMessage, toQueuedSession, toSession, toShares, toTurn } from './rows.js';
import type { CountColumn } from './session-counts-ddl.js';

/** What a view adds to the session row. */
interface ViewFacts {
  pending: number;
  lastInboundStatus: string | null;
  running: Row | undefined;
  lastReply: Row | undefined;
  queuePosition: number | null;
}

/** Above every queue key: QUEUED_BEFORE it counts the whole queue. */
const PAST_EVERY_KEY = Number.MAX_SAFE_INTEGER;

/** How many sessions wait in the claim queue. */
export function* queueDepth(now: number, leaseMs: number): Program<number> {
  return Number(
    (yield* get('QUEUED_BEFORE', { before: PAST_EVERY_KEY, now, staleBefore: now - leaseMs }))!.n,
  );
}

/** The tenants' shares, read once however many sessions of a page ask. */
function sharesOnce(): () => Program<Shares> {
  let shares: Shares | undefined;
  return function* () {
    shares ??= toShares(yield* all('TENANT_SHARES', {}));
    return shares;
  };
}

/** 1-based place of the session in claim order; null when it is not queued (nothing runnable, or a live holder). */
function* queuePositionOf(
  row: Row,
  now: number,
  leaseMs: number,
  shares: () => Program<Shares>,
): Program<number | null> {
  if (row.queued_id == null || Number(row.runnable_at) > now) return null;
  const staleBefore = now - leaseMs;
  if (row.lease_owner != null) {
    const lease = yield* get('SESSION_LEASE', { id: row.id, staleBefore });
    if (Number(lease?.holder_alive) === 1) return null;
  }
  const counts = yield* all('QUEUE_COUNTS', { before: Number(row.queued_id), now, staleBefore });
  const byTenant = new Map(counts.map((c) => [String(c.tenant), { n: Number(c.n), ahead: Number(c.ahead) }]));
  return fairPosition(byTenant, yield* shares(), String(row.tenant));
}

export function* sessionViewOf(sessionId: string, now: number, leaseMs: number): Program<SessionView | null> {
  const row = yield* get('SESSION_BY_ID', { id: sessionId });
  if (!row) return null;
  const counts = (yield* get('SESSION_COUNTS', { sessionId }))!;
  return toSessionView(row, now, {
    pending: Number(counts.pending ?? 0),
    lastInboundStatus: (counts.last_in_status as string | null) ?? null,
    running: yield* get('RUNNING_TURN_OF_SESSION', { sessionId }),
    lastReply: yield* get('LAST_REPLY', { sessionId }),
    queuePosition: yield* queuePositionOf(row, now, leaseMs, sharesOnce()),
  });
}

/**
 * One page of a tenant's sessions (undefined = every tenant's), in creation order, or all of
 * them (no page). Each fact is read for the page's sessions only, in one statement for the
 * whole page; a page counts each tenant's part of the queue for each of its queued sessions
 * (as one session's view does), a full listing reads the queue once. Positions stay global:
 * they count every session ahead, in the fair share.
 */
export function* listSessionViews(
  now: number,
  leaseMs: number,
  tenant?: string,
  page?: PageRequest,
): Program<SessionView[]> {
  const scope = { tenant: tenant ?? null, ...pageParams(BY_CREATION, page) };
  const bySession = (rows: Row[]) => new Map(rows.map((r) => [String(r.session_id), r]));
  const rows = yield* all('SESSIONS_PAGE', scope);
  if (rows.length === 0) return [];
  const counts = bySession(yield* all('PENDING_COUNTS', scope));
  const running = bySession(yield* all('RUNNING_TURNS', scope));
  const lastIn = bySession(yield* all('LAST_MESSAGES', { ...scope, direction: 'in' }));
  const lastOut = bySession(yield* all('LAST_MESSAGES', { ...scope, direction: 'out' }));
  const positions = page ? yield* pagePositions(rows, now, leaseMs) : yield* queuePositions(now, leaseMs);
  return rows.map((row) => {
    const id = String(row.id);
    const c = counts.get(id);
    return toSessionView(row, now, {
      pending: Number(c?.pending ?? 0),
      lastInboundStatus: (lastIn.get(id)?.status as string | undefined) ?? null,
      running: running.get(id),
      lastReply: lastOut.get(id),
      queuePosition: positions.get(id) ?? null,
    });
  });
}

/**
 * The claim-queue positions of a page's queued sessions. Each one's count reads the queue's
 * index (its tenants' totals, and the part ahead of it), so a page with several queued
 * sessions reads the queue once instead, in order, as the full listing does.
 */
function* pagePositions(rows: Row[], now: number, leaseMs: number): Program<Map<string, number>> {
  const queued = rows.filter((row) => row.queued_id != null && Number(row.runnable_at) <= now);
  if (queued.length > 1) return yield* queuePositions(now, leaseMs);
  const positions = new Map<string, number>();
  const shares = sharesOnce();
  for (const row of rows) {
    const position = yield* queuePositionOf(row, now, leaseMs, shares);
    if (position !== null) positions.set(String(row.id), position);
  }
  return positions;
}

/** The store's kept counts (session-counts-ddl.ts) of a tenant, or of every tenant. */
export function* sessionCounts(tenant?: string): Program<SessionCounts> {
  const row = (yield* get('KEPT_COUNTS', { tenant: tenant ?? null }))!;
  const n = (column: CountColumn) => Number(row[column] ?? 0);
  return {
    sessions: n('sessions'),
    archived: n('archived'),
    held: n('held'),
    leased: n('leased'),
    bound: n('bound'),
    waiting: n('waiting'),
    runningTurns: n('running_turns'),
    messages: { pending: n('pending'), processing: n('processing'), failed: n('failed') },
  };
}

/**
 * 1-based place of each queued session in claim order: the free queue and the dead holders'
 * sessions, in the fair share between tenants (fairClaimOrder, as claims take them).
 */
export function* queuePositions(now: number, leaseMs: number): Program<Map<string, number>> {
  const free = yield* all('FREE_QUEUE', { now });
  const deadHeld = yield* all('DEAD_HELD_QUEUE', { now, staleBefore: now - leaseMs });
  const shares = toShares(yield* all('TENANT_SHARES', {}));
  const order = fairClaimOrder([...free, ...deadHeld].map(toQueuedSession), shares);
  return new Map(order.map((q, i) => [q.sessionId, i + 1]));
}

function toSessionView(row: Row, now: number, facts: ViewFacts): SessionView {
  const session = toSession(row);
  // The queue keys name the oldest pending message and when it is due; not yet due, it holds the others.
  const queued = row.queued_id == null ? null : { id: Number(row.queued_id), at: Number(row.runnable_at) };
  const status = deriveSessionStatus({
    archived: session.archivedAt !== null,
    leased: session.leaseOwner !== null && facts.queuePosition === null,
    turnRunning: facts.running !== undefined,
    pending: facts.pending,
    runnable: queued !== null && queued.at <= now,
    lastInboundStatus: facts.lastInboundStatus,
    held: session.hold !== null,
  });
  return {
    ...session,
    status,
    queuePosition: facts.queuePosition,
    pending: facts.pending,
    heldBy: queued && queued.at > now ? { messageId: queued.id, runnableAt: queued.at } : null,
    lastReply: facts.lastReply ? toMessage(facts.lastReply) : null,
    currentTurn: facts.running ? toTurn(facts.running) : null,
  };
}
