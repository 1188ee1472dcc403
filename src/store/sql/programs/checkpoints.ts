/**
 * Checkpoints of running turns. Recording one is fenced like every sandbox write (the
 * generation and lease, and the turn still running under them): a stale worker's
 * checkpoint is refused and its object stays unnamed (garbage). Its number follows the
 * last one of the same work (a retry numbers on), read under the session lock the fence
 * takes; each also writes a `checkpoint` session event, which outlives the row. The
 * model-call journal is fenced the same way and belongs to the same work. Rows
 * go with the commit of that work (turns.ts) or in the sweep below.
 */
import type { JournalledResponse, TurnCheckpoint } from '../../../core/index.js';
import type { CheckpointInput, Fence, Fenced, ModelResponseInput } from '../../store.js';
import { all, get, type Program, type Row, run, type Tx } from '../program.js';
import { insertEvent } from './events.js';
import { checkRunningTurn } from './turns.js';

export function* recordCheckpoint(
  tx: Tx,
  input: Fence & CheckpointInput,
  now: number,
): Program<Fenced<TurnCheckpoint>> {
  const code = yield* checkRunningTurn(input, input.turnId);
  if (code !== 'ok') return { code };
  const { sessionId, messageId } = input;
  const last = yield* get('LAST_CHECKPOINT_SEQ', { sessionId, messageId });
  const seq = Number(last?.seq ?? 0) + 1;
  const checkpoint: TurnCheckpoint = {
    sessionId,
    messageId,
    seq,
    baseSeq: input.baseSeq,
    count: input.count,
    turnId: input.turnId,
    generation: input.generation,
    label: input.label,
    key: input.key,
    size: input.size,
    createdAt: now,
  };
  const inserted = yield* run('INSERT_CHECKPOINT', {
    ...checkpoint,
    blobKey: input.key,
    now,
  });
  // Under the session lock no other writer of this work can have taken the number.
  if (inserted !== 1) return { code: 'stale' };
  // The row goes with the commit; the event stays, for the turn's timeline and live views.
  yield* insertEvent(
    tx,
    sessionId,
    'checkpoint',
    { turnId: input.turnId, seq, count: input.count, label: input.label, bytes: input.size },
    now,
  );
  return { code: 'ok', value: checkpoint };
}

export function* listCheckpoints(sessionId: string, messageId: number): Program<TurnCheckpoint[]> {
  return (yield* all('CHECKPOINTS_OF_MESSAGE', { sessionId, messageId })).map(toCheckpoint);
}

export function* journalModelResponse(input: Fence & ModelResponseInput, now: number): Program<Fenced<void>> {
  const code = yield* checkRunningTurn(input, input.turnId);
  if (code !== 'ok') return { code };
  yield* run('INSERT_MODEL_RESPONSE', {
    sessionId: input.sessionId,
    messageId: input.messageId,
    requestHash: input.requestHash,
    turnId: input.turnId,
    generation: input.generation,
    status: input.status,
    contentType: input.contentType,
    body: input.body.toString('base64'),
    now,
  });
  return { code: 'ok', value: undefined };
}

export function* findModelResponse(
  sessionId: string,
  messageId: number,
  requestHash: string,
): Program<JournalledResponse | null> {
  const r = yield* get('MODEL_RESPONSE_OF_REQUEST', { sessionId, messageId, requestHash });
  if (!r) return null;
  return {
    status: Number(r.status),
    contentType: String(r.content_type),
    body: Buffer.from(String(r.body), 'base64'),
  };
}

/** Deletes the checkpoints (and journalled answers) no retry will resume; returns the checkpoints' objects' keys. */
export function* sweepCheckpoints(): Program<string[]> {
  yield* run('SWEEP_JOURNAL', {});
  return (yield* all('SWEEP_CHECKPOINTS', {})).map((r) => String(r.blob_key));
}

export function* isCheckpointObjectNamed(key: string): Program<boolean> {
  return (yield* get('CHECKPOINT_OBJECT_NAMED', { blobKey: key })) !== undefined;
}

function toCheckpoint(r: Row): TurnCheckpoint {
  return {
    sessionId: String(r.session_id),
    messageId: Number(r.message_id),
    seq: Number(r.seq),
    baseSeq: Number(r.base_seq),
    count: Number(r.count),
    turnId: String(r.turn_id),
    generation: Number(r.generation),
    label: String(r.label),
    key: String(r.blob_key),
    size: Number(r.size),
    createdAt: Number(r.created_at),
  };
}
