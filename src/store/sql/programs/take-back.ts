/**
 * What a client takes back: a queued message (cancelMessage) and the running turn
 * (requestInterrupt). Both lock the session row first (SESSION_LOCKED), as every fenced
 * transition of its worker does (FENCE), so each reads the message or turn as the last
 * transition on the session left it: a message a turn took is no longer pending, and a
 * turn that committed is no longer running. The interrupt only records the request on the
 * turn; the turn's worker ends it (commitTurn refuses it, abortRunningTurn interrupts it).
 */
import { BerthError, type Message, type Turn } from '../../../core/index.js';
import { get, guarded, type Program, type Tx } from '../program.js';
import { toMessage, toTurn } from '../rows.js';
import { ownedBy } from './agents.js';
import { insertEvent } from './events.js';
import { messageGuard, turnGuard } from './guards.js';
import { recomputeQueueKeys } from './queue-keys.js';

/** The session row, locked, if `tenant` may see it; otherwise SESSION_NOT_FOUND. */
export function* lockOwnSession(
  sessionId: string,
  tenant: string | undefined,
  operation: string,
): Program<Record<string, unknown>> {
  const row = yield* get('SESSION_LOCKED', { id: sessionId });
  if (!row || !ownedBy(row, tenant))
    throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist (${operation})`);
  return row;
}

export function* cancelMessage(
  tx: Tx,
  input: { sessionId: string; messageId: number; now: number; tenant?: string },
): Program<Message> {
  const { sessionId, messageId, now } = input;
  const session = yield* lockOwnSession(sessionId, input.tenant, tx.operation);
  const row = yield* get('MESSAGE_BY_ID', { id: messageId });
  if (!row || row.session_id !== sessionId || row.direction !== 'in')
    throw new BerthError(
      'MESSAGE_NOT_FOUND',
      `Session ${sessionId} has no inbound message ${messageId} (${tx.operation})`,
    );
  const message = toMessage(row);
  if (message.status === 'cancelled') return message;
  if (message.status !== 'pending')
    throw new BerthError(
      'MESSAGE_NOT_PENDING',
      `Message ${messageId} of session ${sessionId} is not pending (${tx.operation}). Current state: ${message.status}`,
    );
  yield* guarded(tx, 'CANCEL_MESSAGE', { id: messageId }, messageGuard(messageId, 'pending'));
  // The session's place in the queue was this message's if it was the oldest: the next one moves up.
  yield* recomputeQueueKeys(tx, sessionId);
  yield* insertEvent(tx, sessionId, 'cancelled', { messageId, tries: message.tries }, now);
  // The messages behind it may be due now: its holder (or a claimer) looks again.
  tx.changes.push({
    type: 'enqueued',
    sessionId,
    leaseOwner: (session.lease_owner as string | null) ?? null,
  });
  return toMessage((yield* get('MESSAGE_BY_ID', { id: messageId }))!);
}

export function* requestInterrupt(
  tx: Tx,
  input: { sessionId: string; turnId?: string; now: number; tenant?: string },
): Program<Turn> {
  const { sessionId, now } = input;
  const session = yield* lockOwnSession(sessionId, input.tenant, tx.operation);
  const running = yield* get('RUNNING_TURN_OF_SESSION', { sessionId });
  if (!running || (input.turnId !== undefined && running.id !== input.turnId)) {
    const named = input.turnId === undefined ? null : yield* get('TURN_BY_ID', { id: input.turnId });
    const state =
      named && named.session_id === sessionId ? `turn ${input.turnId} is ${String(named.status)}` : 'none';
    throw new BerthError(
      'NO_RUNNING_TURN',
      `Session ${sessionId} has no running turn to interrupt (${tx.operation}). Current turn: ${state}`,
    );
  }
  const turnId = String(running.id);
  if (running.interrupt_requested_at == null) {
    yield* guarded(tx, 'REQUEST_INTERRUPT', { id: turnId, now }, turnGuard(turnId));
    yield* insertEvent(
      tx,
      sessionId,
      'interrupting',
      { turnId, generation: Number(running.generation) },
      now,
    );
    tx.changes.push({
      type: 'interrupt',
      sessionId,
      leaseOwner: (session.lease_owner as string | null) ?? null,
    });
  }
  return toTurn((yield* get('TURN_BY_ID', { id: turnId }))!);
}
