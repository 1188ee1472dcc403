/**
 * Sessions as clients see them: created (explicitly or by a first message), sent
 * messages, archived, asked to recycle their sandbox; and the views of them.
 */
import { BerthError, type Message, type RetryPolicy, type SessionView } from '../../../core/index.js';
import type { CreateSessionInput, EnqueueInput } from '../../store.js';
import { all, get, guarded, type Program, type Row, run, type Tx } from '../program.js';
import { toMessage } from '../rows.js';
import { sessionViewOf } from '../session-views.js';
import { ownAgentRow, ownedBy } from './agents.js';
import { insertEvent } from './events.js';
import { messageGuard } from './guards.js';
import { queueNewMessage, recomputeQueueKeys } from './queue-keys.js';
import { abortRunningTurn } from './turns.js';

export function* createSession(input: CreateSessionInput, leaseMs: number): Program<SessionView> {
  const { sessionId, now } = input;
  if (yield* get('SESSION_BY_ID', { id: sessionId }))
    throw new BerthError('SESSION_EXISTS', `Session ${sessionId} already exists (createSession)`);
  // A concurrent create of the same id inserts nothing here: SESSION_EXISTS for the loser.
  if (!(yield* insertSession(sessionId, input.agent, input.tenant, now, 'createSession')))
    throw new BerthError('SESSION_EXISTS', `Session ${sessionId} already exists (createSession)`);
  return (yield* sessionViewOf(sessionId, now, leaseMs))!;
}

/**
 * Stop and archive, once: the lease cleared and the generation bumped (the serving
 * sandbox is fenced off), the running turn ended through the one abort path
 * (SESSION_ARCHIVED is terminal: its messages fail), then every other open message
 * failed, and one 'archived' event listing them all. Archiving again changes nothing.
 */
export function* archiveSession(
  tx: Tx,
  sessionId: string,
  now: number,
  tenant: string | undefined,
  policy: { leaseMs: number; retry: RetryPolicy },
): Program<SessionView> {
  yield* ownSessionRow(sessionId, tenant, 'archiveSession');
  if ((yield* run('ARCHIVE_SESSION', { id: sessionId, now })) === 1) {
    const error = `Session ${sessionId} was archived (archiveSession)`;
    const open = (yield* all('OPEN_INBOUND_OF_SESSION', { sessionId })).map(toMessage);
    const running = yield* get('RUNNING_TURN_OF_SESSION', { sessionId });
    if (running)
      yield* abortRunningTurn(
        tx,
        { sessionId, turnId: String(running.id), code: 'SESSION_ARCHIVED', error },
        now,
        policy.retry,
      );
    // Re-read after the abort: the running turn's messages are failed by it already.
    for (const m of (yield* all('OPEN_INBOUND_OF_SESSION', { sessionId })).map(toMessage))
      yield* guarded(
        tx,
        'FAIL_OPEN_MESSAGE',
        { id: m.id, error, errorCode: 'SESSION_ARCHIVED' },
        messageGuard(m.id, 'pending or processing'),
      );
    yield* recomputeQueueKeys(tx, sessionId);
    yield* insertEvent(tx, sessionId, 'archived', { failedMessageIds: open.map((m) => m.id) }, now);
    tx.changes.push({ type: 'released', sessionId });
  }
  return (yield* sessionViewOf(sessionId, now, policy.leaseMs))!;
}

export function* requestRecycle(
  sessionId: string,
  now: number,
  tenant: string | undefined,
  leaseMs: number,
): Program<SessionView> {
  yield* ownSessionRow(sessionId, tenant, 'requestRecycle');
  if ((yield* run('REQUEST_RECYCLE', { id: sessionId, now })) === 0)
    throw new BerthError('SESSION_ARCHIVED', `Session ${sessionId} is archived (requestRecycle)`);
  return (yield* sessionViewOf(sessionId, now, leaseMs))!;
}

/**
 * An inbound message (creating the session on first use, as the caller's tenant may) and
 * its `queued` event. Throws AGENT_REQUIRED, AGENT_NOT_FOUND, SESSION_NOT_FOUND,
 * SESSION_ARCHIVED, SESSION_AGENT_MISMATCH naming the transaction's operation.
 */
export function* enqueueMessage(
  tx: Tx,
  input: EnqueueInput,
  leaseMs: number,
): Program<{ message: Message; view: SessionView; eventId: number }> {
  const { sessionId, text, now } = input;
  if (!(yield* get('SESSION_BY_ID', { id: sessionId })) && input.agent)
    yield* insertSession(sessionId, input.agent, input.tenant, now, tx.operation);
  // Checked after the insert: a concurrent first message may have created it, possibly for another agent.
  const failure = yield* checkEnqueue(input, tx.operation);
  if (failure) throw failure;
  const data = input.data === undefined ? null : JSON.stringify(input.data);
  const message = toMessage((yield* get('INSERT_INBOUND', { sessionId, text, data, now }))!);
  yield* queueNewMessage(tx, sessionId, message.id, now);
  const view = (yield* sessionViewOf(sessionId, now, leaseMs))!;
  tx.changes.push({ type: 'enqueued', sessionId, leaseOwner: view.leaseOwner });
  const eventId = yield* insertEvent(
    tx,
    sessionId,
    'queued',
    { messageId: message.id, position: view.queuePosition, heldBy: view.heldBy },
    now,
  );
  return { message, view, eventId };
}

/** A new session of the agent (the tenant's own), in the agent's tenant; false when one of that id exists already. */
function* insertSession(
  sessionId: string,
  agentName: string,
  tenant: string | undefined,
  now: number,
  operation: string,
): Program<boolean> {
  const agent = yield* ownAgentRow(agentName, tenant, operation);
  return (yield* run('INSERT_SESSION', { id: sessionId, agent: agentName, tenant: agent.tenant, now })) === 1;
}

/** The session `sessionId` if `tenant` may see it; otherwise SESSION_NOT_FOUND (another tenant's looks absent). */
export function* ownSessionRow(
  sessionId: string,
  tenant: string | undefined,
  operation: string,
): Program<Row> {
  const row = yield* get('SESSION_BY_ID', { id: sessionId });
  if (!row || !ownedBy(row, tenant))
    throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist (${operation})`);
  return row;
}

/** Why a message to this session would be refused now, or null (nothing written). */
export function* checkEnqueue(
  input: { sessionId: string; agent?: string; tenant?: string },
  operation: string,
): Program<BerthError | null> {
  const existing = yield* get('SESSION_BY_ID', { id: input.sessionId });
  if (!existing) {
    if (!input.agent)
      return new BerthError(
        'AGENT_REQUIRED',
        `Session ${input.sessionId} does not exist and no agent was named (${operation})`,
      );
    const agent = yield* get('AGENT_BY_NAME', { name: input.agent });
    if (!agent || !ownedBy(agent, input.tenant))
      return new BerthError('AGENT_NOT_FOUND', `Agent ${input.agent} does not exist (${operation})`);
    return null;
  }
  if (!ownedBy(existing, input.tenant))
    return new BerthError('SESSION_NOT_FOUND', `Session ${input.sessionId} does not exist (${operation})`);
  if (existing.archived_at != null)
    return new BerthError('SESSION_ARCHIVED', `Session ${input.sessionId} is archived (${operation})`);
  if (input.agent && existing.agent !== input.agent)
    return new BerthError(
      'SESSION_AGENT_MISMATCH',
      `Session ${input.sessionId} belongs to agent ${String(existing.agent)}, not ${input.agent} (${operation})`,
    );
  return null;
}

/** The tenant a schedule to this session belongs to, checked as an enqueue would be (nothing written). */
export function* sessionTenantFor(
  input: { sessionId: string; agent?: string; tenant?: string },
  operation: string,
): Program<string> {
  const failure = yield* checkEnqueue(input, operation);
  if (failure) throw failure;
  const existing = yield* get('SESSION_BY_ID', { id: input.sessionId });
  if (existing) return String(existing.tenant);
  return String((yield* ownAgentRow(input.agent!, input.tenant, operation)).tenant);
}

export function* getSessionView(
  sessionId: string,
  now: number,
  leaseMs: number,
  tenant: string | undefined,
): Program<SessionView | null> {
  const view = yield* sessionViewOf(sessionId, now, leaseMs);
  return view && (tenant === undefined || view.tenant === tenant) ? view : null;
}
