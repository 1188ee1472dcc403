/**
 * A session's place in the claim queue lives on its row (queued_id: its oldest pending
 * inbound message; runnable_at: when the first of them is due), so the queue is one index
 * (sessions_queue). Every transition that changes the session's pending messages keeps
 * them: a new message only moves them back (QUEUE_NEW_MESSAGE, safe without the row lock);
 * a transition that takes, retries, requeues or fails messages holds the session row and
 * recomputes them from the messages after (RECOMPUTE_QUEUE_KEYS). Leases need nothing
 * here: the index holds only sessions nobody leases.
 */
import { guarded, type Program, type Tx } from '../program.js';
import { sessionGuard } from './guards.js';

export function* queueNewMessage(tx: Tx, sessionId: string, messageId: number, now: number): Program<void> {
  yield* guarded(
    tx,
    'QUEUE_NEW_MESSAGE',
    { id: sessionId, messageId, now },
    sessionGuard(sessionId, 'present'),
  );
}

/** After the caller changed the session's pending messages, holding its row. */
export function* recomputeQueueKeys(tx: Tx, sessionId: string): Program<void> {
  yield* guarded(tx, 'RECOMPUTE_QUEUE_KEYS', { id: sessionId }, sessionGuard(sessionId, 'present'));
}
