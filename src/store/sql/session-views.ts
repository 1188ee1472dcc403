/** What a client sees of sessions (status, queue position, last reply), read from either SQL store. */
import type { SessionView } from '../../core/index.js';
import { deriveSessionStatus } from '../session-status.js';
import { all, get, type Program, type Row } from './program.js';
import { toMessage, toSession, toTurn } from './rows.js';

/** 1-based place of each queued session in claim order. */
export function* queuePositions(now: number, leaseMs: number): Program<Map<string, number>> {
  const rows = yield* all('QUEUE', { now, staleBefore: now - leaseMs });
  return new Map(rows.map((r, i) => [String(r.session_id), i + 1]));
}

export function* sessionViewOf(sessionId: string, now: number, leaseMs: number): Program<SessionView | null> {
  const row = yield* get('SESSION_BY_ID', { id: sessionId });
  if (!row) return null;
  return yield* sessionViewOfRow(row, now, yield* queuePositions(now, leaseMs));
}

/** tenant undefined = every tenant's. */
export function* listSessionViews(now: number, leaseMs: number, tenant?: string): Program<SessionView[]> {
  const positions = yield* queuePositions(now, leaseMs);
  const views: SessionView[] = [];
  for (const row of yield* all('ALL_SESSIONS', { tenant: tenant ?? null }))
    views.push(yield* sessionViewOfRow(row, now, positions));
  return views;
}

function* sessionViewOfRow(row: Row, now: number, positions: Map<string, number>): Program<SessionView> {
  const session = toSession(row);
  const counts = (yield* get('SESSION_COUNTS', { sessionId: session.id, now }))!;
  const running = yield* get('RUNNING_TURN_OF_SESSION', { sessionId: session.id });
  const lastReply = yield* get('LAST_REPLY', { sessionId: session.id });
  const queuePosition = positions.get(session.id) ?? null;
  const status = deriveSessionStatus({
    archived: session.archivedAt !== null,
    leased: session.leaseOwner !== null && queuePosition === null,
    turnRunning: running !== undefined,
    pending: Number(counts.pending ?? 0),
    runnable: Number(counts.runnable ?? 0),
    lastInboundStatus: (counts.last_in_status as string | null) ?? null,
  });
  return {
    ...session,
    status,
    queuePosition,
    pending: Number(counts.pending ?? 0),
    lastReply: lastReply ? toMessage(lastReply) : null,
    currentTurn: running ? toTurn(running) : null,
  };
}
