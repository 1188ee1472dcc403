/**
 * Parts of the Store's programs (run inside a write transaction, see program.ts): the
 * checks and writes several transitions share. Each re-reads what it decides on inside
 * the caller's transaction.
 */
import {
  type AbortInput,
  BerthError,
  type CommitInput,
  decideAbortedMessage,
  type Message,
  newId,
  type RetryPolicy,
  type SessionEventType,
  type SessionView,
} from '../../core/index.js';
import type { EnqueueInput, Fence, FenceCode, StoreChange } from '../store.js';
import { all, get, type Program, type Row, run } from './program.js';
import { toMessage } from './rows.js';
import { sessionViewOf } from './session-views.js';

/**
 * The lease holder is dead: its running turn is aborted and the lease cleared, before
 * anyone else binds. The session row is locked by the caller; false when, re-read under
 * that lock, its holder turned out alive (or gone) after all.
 */
export function* reclaimSession(
  changes: StoreChange[],
  sessionId: string,
  now: number,
  policy: { leaseMs: number; retry: RetryPolicy },
): Program<boolean> {
  const lease = yield* get('SESSION_LEASE', { id: sessionId, staleBefore: now - policy.leaseMs });
  if (!lease || lease.lease_owner === null || Number(lease.holder_alive) === 1) return false;
  const running = yield* get('RUNNING_TURN_OF_SESSION', { sessionId });
  if (running)
    yield* abortRunningTurn(
      changes,
      {
        sessionId,
        turnId: String(running.id),
        code: 'LEASE_EXPIRED',
        error: `Worker ${lease.lease_owner} stopped renewing its lease (reclaimExpiredLeases)`,
      },
      now,
      policy.retry,
    );
  yield* run('CLEAR_LEASE', { id: sessionId, now });
  changes.push({ type: 'released', sessionId });
  return true;
}

export function* abortRunningTurn(
  changes: StoreChange[],
  input: Pick<AbortInput, 'sessionId' | 'turnId' | 'code' | 'error' | 'detectedAfterMs'>,
  now: number,
  retry: RetryPolicy,
): Program<void> {
  const { sessionId, turnId, code, error } = input;
  // How long the turn's death went unnoticed (sandbox exit or last heartbeat to this abort), for the metrics.
  const detected = input.detectedAfterMs === undefined ? {} : { detectedAfterMs: input.detectedAfterMs };
  for (const m of yield* turnMessages(turnId)) {
    const decision = decideAbortedMessage(m.tries, now, retry, code);
    switch (decision.action) {
      case 'requeue':
        yield* run('REQUEUE_MESSAGE', { id: m.id, now, error, errorCode: code });
        yield* insertEvent(
          changes,
          sessionId,
          'retrying',
          { turnId, messageId: m.id, tries: m.tries - 1, code, error, retryInMs: 0, ...detected },
          now,
        );
        break;
      case 'retry':
        yield* run('RETRY_MESSAGE', {
          id: m.id,
          processAfter: decision.processAfter,
          error,
          errorCode: code,
        });
        yield* insertEvent(
          changes,
          sessionId,
          'retrying',
          { turnId, messageId: m.id, tries: m.tries, code, error, retryInMs: decision.delayMs, ...detected },
          now,
        );
        break;
      case 'fail':
        yield* run('FAIL_MESSAGE', { id: m.id, error, errorCode: code });
        yield* insertEvent(
          changes,
          sessionId,
          'failed',
          { turnId, messageId: m.id, tries: m.tries, code, error, ...detected },
          now,
        );
        break;
    }
  }
  yield* run('END_TURN', { id: turnId, status: 'aborted', error, errorCode: code, now });
}

/**
 * An inbound message (creating the session on first use, as the caller's tenant may) and
 * its `queued` event. Throws AGENT_REQUIRED, AGENT_NOT_FOUND, SESSION_NOT_FOUND,
 * SESSION_ARCHIVED, SESSION_AGENT_MISMATCH naming `operation`.
 */
export function* enqueueInTx(
  changes: StoreChange[],
  input: EnqueueInput,
  leaseMs: number,
  operation: string,
): Program<{ message: Message; view: SessionView; eventId: number }> {
  const { sessionId, text, now } = input;
  if (!(yield* get('SESSION_BY_ID', { id: sessionId })) && input.agent) {
    const agent = yield* ownAgentRow(input.agent, input.tenant, operation);
    yield* run('INSERT_SESSION', { id: sessionId, agent: input.agent, tenant: agent.tenant, now });
  }
  // Checked after the insert: a concurrent first message may have created it, possibly for another agent.
  const failure = yield* checkEnqueue(input, operation);
  if (failure) throw failure;
  const message = toMessage((yield* get('INSERT_INBOUND', { sessionId, text, now }))!);
  const view = (yield* sessionViewOf(sessionId, now, leaseMs))!;
  changes.push({ type: 'enqueued', sessionId, leaseOwner: view.leaseOwner });
  const eventId = yield* insertEvent(
    changes,
    sessionId,
    'queued',
    { messageId: message.id, position: view.queuePosition },
    now,
  );
  return { message, view, eventId };
}

/** The tenant a schedule to this session belongs to, checked as an enqueue would be (nothing written). */
/**
 * The schedules a committing turn made. The cap was checked when each was asked for; it is
 * checked again here, in the commit, so two sessions of one agent cannot pass it together
 * (the commit fails with SCHEDULE_LIMIT and the turn is retried: its tool then says so).
 */
export function* insertTurnSchedules(
  sessionId: string,
  turnId: string,
  schedules: NonNullable<CommitInput['schedules']>,
  now: number,
): Program<void> {
  const made = Number((yield* get('AGENT_MADE_SCHEDULES', { agent: schedules.agent }))!.n);
  if (made + schedules.items.length > schedules.cap)
    throw new BerthError(
      'SCHEDULE_LIMIT',
      `Agent ${schedules.agent} may have at most ${schedules.cap} schedules made by its turns; it has ${made}, this turn adds ${schedules.items.length}`,
    );
  const tenant = String((yield* get('SESSION_BY_ID', { id: sessionId }))!.tenant);
  for (const item of schedules.items) {
    const id = newId('sch');
    yield* run('INSERT_SCHEDULE', {
      ...item,
      sessionId,
      agent: null,
      tenant,
      id,
      createdByTurn: turnId,
      now,
    });
  }
}

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

/** The live agent `name` if `tenant` may use it; otherwise AGENT_NOT_FOUND (another tenant's looks absent). */
export function* ownAgentRow(name: string, tenant: string | undefined, operation: string): Program<Row> {
  const row = yield* get('AGENT_BY_NAME', { name });
  if (!row || !ownedBy(row, tenant))
    throw new BerthError('AGENT_NOT_FOUND', `Agent ${name} does not exist (${operation})`);
  return row;
}

/** A row with a tenant column is visible to that tenant and to the operator (tenant undefined). */
export function ownedBy(row: Row, tenant: string | undefined): boolean {
  return tenant === undefined || row.tenant === tenant;
}

/** The agent whose namespace a session's storage calls reach: the session's own, read inside the transaction. */
export function* agentOfSession(sessionId: string): Program<string> {
  return String((yield* get('SESSION_BY_ID', { id: sessionId }))!.agent);
}

export function* checkFence(fence: Fence): Program<FenceCode> {
  if (yield* get('FENCE', fenceParams(fence))) return 'ok';
  return (yield* get('SESSION_BY_ID', { id: fence.sessionId })) ? 'stale' : 'not_found';
}

export function* checkRunningTurn(fence: Fence, turnId: string): Program<FenceCode> {
  const code = yield* checkFence(fence);
  if (code !== 'ok') return code;
  const turn = yield* get('TURN_BY_ID', { id: turnId });
  if (!turn || turn.session_id !== fence.sessionId) return 'not_found';
  if (turn.status !== 'running' || Number(turn.generation) !== fence.generation) return 'stale';
  return 'ok';
}

export function* turnMessages(turnId: string): Program<Message[]> {
  return (yield* all('PROCESSING_OF_TURN', { turnId })).map(toMessage);
}

export function* insertEvent(
  changes: StoreChange[],
  sessionId: string,
  type: SessionEventType,
  data: Record<string, unknown>,
  now: number,
): Program<number> {
  const row = (yield* get('INSERT_EVENT', { sessionId, type, data: JSON.stringify(data), now }))!;
  const id = Number(row.id);
  yield* run('INSERT_DELIVERIES_FOR_EVENT', { eventId: id, sessionId, type, now });
  changes.push({ type: 'event', event: { id, sessionId, type, data, createdAt: now } });
  return id;
}

export function fenceParams(f: Fence): Row {
  return { id: f.sessionId, generation: f.generation, worker: f.workerId };
}
