/** What a client sees of sessions (status, queue position, last reply), read from the SQLite store. */
import type { SessionView } from '../../core/index.js';
import { deriveSessionStatus } from '../session-status.js';
import { type Row, toMessage, toSession, toTurn } from './rows.js';
import type { StatementCache } from './statement-cache.js';
import * as sql from './statements.js';

/** 1-based place of each queued session in claim order. */
export function queuePositions(q: StatementCache, now: number, leaseMs: number): Map<string, number> {
  const rows = q.all(sql.QUEUE, { now, staleBefore: now - leaseMs });
  return new Map(rows.map((r, i) => [String(r.session_id), i + 1]));
}

export function sessionViewOf(
  q: StatementCache,
  sessionId: string,
  now: number,
  leaseMs: number,
): SessionView | null {
  const row = q.get(sql.SESSION_BY_ID, { id: sessionId });
  return row ? sessionViewOfRow(q, row, now, queuePositions(q, now, leaseMs)) : null;
}

export function sessionViewOfRow(
  q: StatementCache,
  row: Row,
  now: number,
  positions: Map<string, number>,
): SessionView {
  const session = toSession(row);
  const counts = q.get(sql.SESSION_COUNTS, { sessionId: session.id, now })!;
  const running = q.get(sql.RUNNING_TURN_OF_SESSION, { sessionId: session.id });
  const lastReply = q.get(sql.LAST_REPLY, { sessionId: session.id });
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
