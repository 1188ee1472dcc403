/**
 * Turns and the messages they take: start (runnable messages into a running turn),
 * progress, commit (messages done, state, schedules, the layer owed, replies) and abort
 * (each message retried, requeued, interrupted or failed by the catalogue's policy). Every
 * write is under the running-turn fence, whose lock makes each guarded statement match its
 * row. A turn its user asked to interrupt (requestInterrupt) never commits, and whatever
 * aborts it ends it interrupted: the request and the commit lock the same session row, so
 * the first of the two decides the turn's one outcome.
 */
import {
  type AbortInput,
  BerthError,
  BY_START,
  type CommitInput,
  decideAbortedMessage,
  type Message,
  newId,
  nextBatch,
  type PageRequest,
  type ReplyScope,
  type RetryPolicy,
  type StartedTurn,
  type Turn,
  type TurnRecord,
} from '../../../core/index.js';
import type { CommitCode, Fence, FenceCode, Fenced, ProgressInput } from '../../store.js';
import { pageParams } from '../keyset.js';
import { all, get, guarded, type Program, run, type Tx } from '../program.js';
import { toMessage, toTurn } from '../rows.js';
import { queueChannelFiles } from './channel-outbox.js';
import { insertEvent } from './events.js';
import { checkFence } from './fence.js';
import { messageGuard, sessionGuard, turnGuard } from './guards.js';
import { holdSession, recordResidentWrite } from './holds.js';
import { recomputeQueueKeys } from './queue-keys.js';
import { appendLayer } from './workspace.js';

/** The session's running turn if there is one; else its next batch (nextBatch) taken into a new one (null when none is runnable). */
export function* startTurn(tx: Tx, fence: Fence, now: number): Program<Fenced<StartedTurn | null>> {
  const code = yield* checkFence(fence);
  if (code !== 'ok') return { code };
  const { sessionId } = fence;
  const running = yield* get('RUNNING_TURN_OF_SESSION', { sessionId });
  if (running) {
    const messages = yield* turnMessages(String(running.id));
    return { code: 'ok', value: { turn: toTurn(running), messages } };
  }
  const runnable = nextBatch((yield* all('PENDING_OF_SESSION', { sessionId })).map(toMessage), now);
  if (runnable.length === 0) return { code: 'ok', value: null };
  const turnId = newId('turn');
  const attempt = Math.max(...runnable.map((m) => m.tries)) + 1;
  for (const m of runnable)
    yield* guarded(tx, 'TAKE_MESSAGE', { id: m.id, turnId }, messageGuard(m.id, 'pending'));
  yield* recomputeQueueKeys(tx, sessionId);
  const session = (yield* get('SESSION_BY_ID', { id: sessionId }))!;
  yield* run('INSERT_TURN', {
    id: turnId,
    sessionId,
    attempt,
    generation: fence.generation,
    worker: fence.workerId,
    sandbox: session.sandbox,
    messageIds: JSON.stringify(runnable.map((m) => m.id)),
    now,
  });
  yield* insertEvent(tx, sessionId, 'started', { turnId, attempt, generation: fence.generation }, now);
  const turn = toTurn((yield* get('TURN_BY_ID', { id: turnId }))!);
  return { code: 'ok', value: { turn, messages: yield* turnMessages(turnId) } };
}

export function* recordProgress(tx: Tx, input: ProgressInput, now: number): Program<FenceCode> {
  const code = yield* checkRunningTurn(input, input.turnId);
  if (code !== 'ok') return code;
  const { turnId, text, failedStep } = input;
  yield* guarded(tx, 'SET_TURN_PROGRESS', { id: turnId, text }, turnGuard(turnId));
  yield* insertEvent(
    tx,
    input.sessionId,
    'progress',
    { turnId, text, ...(failedStep ? { failedStep } : {}) },
    now,
  );
  return 'ok';
}

export function* commitTurn(tx: Tx, input: CommitInput, now: number): Program<CommitCode> {
  const { sessionId, turnId } = input;
  const code = yield* checkRunningTurn(input, turnId);
  if (code !== 'ok') return code;
  if ((yield* get('TURN_BY_ID', { id: turnId }))!.interrupt_requested_at != null) return 'interrupted';
  const version = Number((yield* get('SESSION_BY_ID', { id: sessionId }))!.workspace_version);
  // A turn that ran on another workspace than the store's must not commit: its writes were made against the wrong files.
  if (input.workspace && input.workspace.baseVersion !== version) return 'workspace_behind';
  const messageIds = (yield* turnMessages(turnId)).map((m) => m.id);
  for (const id of messageIds) yield* guarded(tx, 'FINISH_MESSAGE', { id }, messageGuard(id, 'processing'));
  for (const [key, value] of Object.entries(input.state ?? {})) {
    if (value === null) yield* run('DELETE_STATE', { sessionId, key });
    else yield* run('UPSERT_STATE', { sessionId, key, value: JSON.stringify(value), turnId, now });
  }
  if (input.schedules?.items.length) yield* insertTurnSchedules(sessionId, turnId, input.schedules, now);
  yield* guarded(tx, 'SET_PENDING_LAYER', { id: sessionId, turnId, now }, sessionGuard(sessionId, 'present'));
  const layer = input.workspace && 'layer' in input.workspace ? input.workspace.layer : null;
  if (layer) yield* appendLayer(sessionId, { version: version + 1, ...layer, turnId }, now);
  if (input.workspace && 'residentHolder' in input.workspace)
    yield* recordResidentWrite(tx, sessionId, input.workspace.residentHolder, now);
  yield* endTurn(tx, turnId, 'committed', null, now, input.workspace?.baseVersion ?? null);
  // The work is committed: its checkpoints are no longer a start for anything (their objects are garbage).
  yield* run('DELETE_CHECKPOINTS_OF_SESSION', { sessionId });
  yield* run('DELETE_JOURNAL_OF_SESSION', { sessionId });
  for (const output of input.outputs) {
    const data = output.data === undefined ? null : JSON.stringify(output.data);
    // An output that names no message answers the whole turn (a model's one reply to all it was sent).
    const inReplyTo = output.inReplyTo ?? messageIds;
    const scope: ReplyScope = output.inReplyTo ? 'message' : 'turn';
    const reply = (yield* get('INSERT_OUTBOUND', {
      sessionId,
      text: output.text,
      data,
      turnId,
      inReplyTo: JSON.stringify(inReplyTo),
      now,
    }))!;
    yield* insertEvent(
      tx,
      sessionId,
      'reply',
      { turnId, messageId: Number(reply.id), inReplyTo, scope, text: output.text, data: output.data ?? null },
      now,
    );
  }
  const files = input.workspace && 'outbox' in input.workspace ? input.workspace.outbox : undefined;
  if (files?.length) yield* queueChannelFiles(tx, sessionId, files, messageIds.at(-1), now);
  return 'ok';
}

export function* abortTurn(tx: Tx, input: AbortInput, now: number, retry: RetryPolicy): Program<FenceCode> {
  const code = yield* checkRunningTurn(input, input.turnId);
  if (code !== 'ok') return code;
  yield* abortRunningTurn(tx, input, now, retry);
  return 'ok';
}

/**
 * The one abort path, whoever ends the turn (its sandbox, the sweep, archiving): each of
 * its messages is retried with backoff, requeued, held, interrupted or failed, as the
 * catalogue says of the code (a held message holds its session); the turn is aborted, or
 * interrupted. A turn its user asked to interrupt is interrupted whatever ended it (the
 * kill the request caused, a sweep after its worker died). The caller holds the session
 * row and read the turn as running.
 */
export function* abortRunningTurn(
  tx: Tx,
  input: Pick<AbortInput, 'sessionId' | 'turnId' | 'code' | 'error' | 'detectedAfterMs'>,
  now: number,
  retry: RetryPolicy,
): Program<void> {
  const { sessionId, turnId } = input;
  const asked = (yield* get('TURN_BY_ID', { id: turnId }))!.interrupt_requested_at != null;
  const code = asked ? 'TURN_INTERRUPTED' : input.code;
  const error =
    asked && input.code !== 'TURN_INTERRUPTED'
      ? `Turn ${turnId} was interrupted at its user's request (abortTurn; it ended with ${input.code}: ${input.error})`
      : input.error;
  let interrupted = false;
  // How long the turn's death went unnoticed (sandbox exit or last heartbeat to this abort), for the metrics.
  const detected = input.detectedAfterMs === undefined ? {} : { detectedAfterMs: input.detectedAfterMs };
  let held = false;
  for (const m of yield* turnMessages(turnId)) {
    const decision = decideAbortedMessage(m.tries, now, retry, code);
    const guard = messageGuard(m.id, 'processing');
    switch (decision.action) {
      // A held message is requeued the same way (its try given back) but waits for an operator: its own event.
      case 'requeue':
      case 'hold': {
        const hold = decision.action === 'hold';
        yield* guarded(tx, 'REQUEUE_MESSAGE', { id: m.id, now, error, errorCode: code }, guard);
        yield* insertEvent(
          tx,
          sessionId,
          hold ? 'held' : 'retrying',
          {
            turnId,
            messageId: m.id,
            tries: m.tries - 1,
            code,
            error,
            ...(hold ? {} : { retryInMs: 0 }),
            ...detected,
          },
          now,
        );
        held ||= hold;
        break;
      }
      case 'retry':
        yield* guarded(
          tx,
          'RETRY_MESSAGE',
          { id: m.id, processAfter: decision.processAfter, error, errorCode: code },
          guard,
        );
        yield* insertEvent(
          tx,
          sessionId,
          'retrying',
          { turnId, messageId: m.id, tries: m.tries, code, error, retryInMs: decision.delayMs, ...detected },
          now,
        );
        break;
      case 'interrupt':
        yield* guarded(tx, 'INTERRUPT_MESSAGE', { id: m.id, error, errorCode: code }, guard);
        yield* insertEvent(
          tx,
          sessionId,
          'interrupted',
          { turnId, messageId: m.id, tries: m.tries, code, error },
          now,
        );
        interrupted = true;
        break;
      case 'fail':
        yield* guarded(tx, 'FAIL_MESSAGE', { id: m.id, error, errorCode: code }, guard);
        yield* insertEvent(
          tx,
          sessionId,
          'failed',
          { turnId, messageId: m.id, tries: m.tries, code, error, ...detected },
          now,
        );
        break;
    }
  }
  if (held) yield* holdSession(tx, sessionId, { code, error }, now);
  yield* recomputeQueueKeys(tx, sessionId);
  yield* endTurn(tx, turnId, interrupted || asked ? 'interrupted' : 'aborted', { error, code }, now, null);
}

function* endTurn(
  tx: Tx,
  turnId: string,
  status: 'committed' | 'aborted' | 'interrupted',
  why: { error: string; code: string } | null,
  now: number,
  baseVersion: number | null,
): Program<void> {
  yield* guarded(
    tx,
    'END_TURN',
    { id: turnId, status, error: why?.error ?? null, errorCode: why?.code ?? null, baseVersion, now },
    turnGuard(turnId),
  );
}

/** The fence, then the turn: of this session (else not_found), running and of this generation (else stale). */
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

/**
 * The schedules a committing turn made. The cap was checked when each was asked for; it is
 * checked again here, in the commit, so two sessions of one agent cannot pass it together
 * (the commit fails with SCHEDULE_LIMIT and the turn is retried: its tool then says so).
 */
function* insertTurnSchedules(
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
    yield* run('INSERT_SCHEDULE', {
      ...item,
      sessionId,
      agent: null,
      tenant,
      id: newId('sch'),
      createdByTurn: turnId,
      now,
    });
  }
}

/** Clears the owed layer if it still names this turn; idempotent (CLEAR_PENDING_LAYER). */
export function* markLayerPromoted(sessionId: string, turnId: string): Program<void> {
  yield* run('CLEAR_PENDING_LAYER', { id: sessionId, turnId });
}

export function* getTurn(turnId: string): Program<Turn | null> {
  const row = yield* get('TURN_BY_ID', { id: turnId });
  return row ? toTurn(row) : null;
}

/** A turn of the session with its attempts, messages, replies and the state it still holds; null when the session has no such turn. */
export function* turnRecord(sessionId: string, turnId: string): Program<TurnRecord | null> {
  const row = yield* get('TURN_BY_ID', { id: turnId });
  if (!row || row.session_id !== sessionId) return null;
  const turn = toTurn(row);
  const ids = new Set(turn.messageIds);
  const attempts = (yield* listTurns(sessionId)).filter((t) => t.messageIds.some((id) => ids.has(id)));
  const messageIds = [...new Set(attempts.flatMap((t) => t.messageIds))].sort((a, b) => a - b);
  const messages: Message[] = [];
  for (const id of messageIds) {
    const m = yield* get('MESSAGE_BY_ID', { id });
    if (m) messages.push(toMessage(m));
  }
  const replies = (yield* all('REPLIES_OF_TURN', { sessionId, turnId })).map(toMessage);
  const state = Object.fromEntries(
    (yield* all('STATE_OF_TURN', { sessionId, turnId })).map((r) => [
      String(r.key),
      JSON.parse(String(r.value)),
    ]),
  );
  return { turn, attempts, messages, replies, state };
}

export function* listTurns(sessionId: string, page?: PageRequest): Program<Turn[]> {
  return (yield* all('TURNS_OF_SESSION', { sessionId, ...pageParams(BY_START, page) })).map(toTurn);
}

export function* listMessages(sessionId: string, afterId: number, limit: number): Program<Message[]> {
  return (yield* all('MESSAGES_AFTER', { sessionId, afterId, limit })).map(toMessage);
}

/** The session's committed state, key → JSON value. */
export function* getState(sessionId: string): Program<Record<string, unknown>> {
  const rows = yield* all('STATE_OF_SESSION', { sessionId });
  return Object.fromEntries(rows.map((r) => [String(r.key), JSON.parse(String(r.value))]));
}

export function* meanTurnMs(limit: number): Program<number | null> {
  const row = yield* get('MEAN_TURN_MS', { limit });
  return row?.ms == null ? null : Math.round(Number(row.ms));
}
