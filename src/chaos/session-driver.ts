/**
 * The client side of the chaos workload: one session's turns, sent strictly one after
 * another through the public API, each followed on the session's event stream. Every
 * request ends in exactly one Jepsen outcome:
 *   ok       its reply arrived (a `reply` event whose inReplyTo has the message id)
 *   fail     berth said it failed (a `failed` event for it, or a 4xx refusing the POST)
 *   unknown  we cannot tell (timeout, stream or connection error, run cut short): the
 *            message may or may not have been processed
 *
 * Invariants:
 * - A session sends turn k+1 only after turn k was ok; after a fail or unknown it stops
 *   (its next plan would assert on a state nobody can predict), and the rest are not sent.
 * - Each request is bounded by the run's abort signal, and ends unknown once berth said
 *   nothing about it for `messageTimeoutMs` (no answer to the POST, no event on the session's
 *   stream): a message queued behind others gets its position, so a slow machine's long
 *   queue is latency, not a timeout.
 */

import type { ApiClient } from '../client/index.js';
import { BerthError, isBerthError } from '../core/index.js';
import { expectedReply, turnPlan } from './workload.js';

export type Outcome = 'ok' | 'fail' | 'unknown';

export interface RequestRecord {
  session: string;
  turn: number;
  /** null when the POST itself got no answer. */
  messageId: number | null;
  outcome: Outcome;
  /** Why it was not ok; for ok, '' (or a note when the reply text was wrong). */
  reason: string;
  /** `retrying` events the client saw for this message. */
  retriesSeen: number;
  /** Events of the session the client received while following this message, and the last one's type. */
  eventsSeen: number;
  lastEvent: string | null;
  sentAt: number;
  endedAt: number;
  /** The reply's text (ok only). */
  replyText: string | null;
}

export interface DriverContext {
  client: ApiClient;
  agent: string;
  turns: number;
  seed: number;
  messageTimeoutMs: number;
  /** Aborted when the run is cut (duration cap) or torn down. */
  abort: AbortSignal;
  onRecord(record: RequestRecord): void;
}

/** Sends turns 1..T of one session; returns how many were never sent. */
export async function driveSession(
  ctx: DriverContext,
  sessionIndex: number,
  session: string,
): Promise<number> {
  for (let turn = 1; turn <= ctx.turns; turn++) {
    if (ctx.abort.aborted) return ctx.turns - turn + 1;
    const record = await sendTurn(ctx, sessionIndex, session, turn);
    ctx.onRecord(record);
    if (record.outcome !== 'ok') return ctx.turns - turn;
  }
  return 0;
}

async function sendTurn(ctx: DriverContext, sessionIndex: number, session: string, turn: number) {
  const sentAt = Date.now();
  const base = {
    session,
    turn,
    retriesSeen: 0,
    eventsSeen: 0,
    lastEvent: null as string | null,
    sentAt,
    replyText: null as string | null,
  };
  const end = (outcome: Outcome, messageId: number | null, reason: string) => ({
    ...base,
    messageId,
    outcome,
    reason,
    endedAt: Date.now(),
  });
  const deadline = messageDeadline(ctx.abort, ctx.messageTimeoutMs);
  try {
    return await followTurn(ctx, sessionIndex, session, turn, base, end, deadline);
  } finally {
    deadline.clear();
  }
}

async function followTurn(
  ctx: DriverContext,
  sessionIndex: number,
  session: string,
  turn: number,
  base: { eventsSeen: number; lastEvent: string | null; retriesSeen: number; replyText: string | null },
  end: (outcome: Outcome, messageId: number | null, reason: string) => RequestRecord,
  deadline: MessageDeadline,
): Promise<RequestRecord> {
  const { signal } = deadline;
  const text = JSON.stringify(turnPlan(sessionIndex, turn, { session, seed: ctx.seed }));
  let posted: { message: { id: number }; eventId: number };
  try {
    posted = await withSignal(
      ctx.client.request('POST', `/v1/sessions/${encodeURIComponent(session)}/messages`, {
        agent: ctx.agent,
        text,
      }),
      signal,
    );
  } catch (err) {
    // A 4xx is a definite refusal; anything else (no answer, 5xx, timeout) may have been accepted.
    const refused = isBerthError(err) && err.status >= 400 && err.status < 500;
    return end(refused ? 'fail' : 'unknown', null, `POST: ${describe(err, ctx.abort)}`);
  }
  const messageId = posted.message.id;
  try {
    for await (const e of ctx.client.events(session, posted.eventId, signal)) {
      const d = e.data;
      deadline.heard();
      base.eventsSeen++;
      base.lastEvent = e.type;
      if (e.type === 'retrying' && d.messageId === messageId) base.retriesSeen++;
      if (e.type === 'failed' && d.messageId === messageId) return end('fail', messageId, String(d.error));
      if (e.type === 'reply' && Array.isArray(d.inReplyTo) && d.inReplyTo.includes(messageId)) {
        base.replyText = String(d.text);
        const want = expectedReply(session, turn);
        return end(
          'ok',
          messageId,
          base.replyText === want ? '' : `reply ${base.replyText}, expected ${want}`,
        );
      }
    }
    return end('unknown', messageId, 'event stream ended before the reply');
  } catch (err) {
    return end('unknown', messageId, `events: ${describe(err, ctx.abort)}`);
  }
}

interface MessageDeadline {
  signal: AbortSignal;
  /** Berth said something about the message: the silence starts again. */
  heard(): void;
  clear(): void;
}

/**
 * Aborts at the run's abort, or after `ms` of silence, with a TimeoutError like
 * AbortSignal.timeout's. Not AbortSignal.any over AbortSignal.timeout: on Node 20 the
 * collector may drop the inner timeout signal, and the timeout then never fired
 * (nodejs/node#57736).
 */
function messageDeadline(runAbort: AbortSignal, ms: number): MessageDeadline {
  const controller = new AbortController();
  const onRunAbort = () => controller.abort(runAbort.reason);
  if (runAbort.aborted) onRunAbort();
  else runAbort.addEventListener('abort', onRunAbort, { once: true });
  const arm = () => setTimeout(() => controller.abort(new DOMException(SILENCE, 'TimeoutError')), ms);
  let timer = arm();
  return {
    signal: controller.signal,
    heard: () => {
      clearTimeout(timer);
      timer = arm();
    },
    clear: () => {
      clearTimeout(timer);
      runAbort.removeEventListener('abort', onRunAbort);
    },
  };
}

const SILENCE = 'nothing from berth about the message within the per-message timeout';

function describe(err: unknown, runAbort: AbortSignal): string {
  if (runAbort.aborted) return 'run cut short (--duration reached, or interrupted)';
  const e = err as Error;
  if (e.name === 'TimeoutError') return SILENCE;
  return isBerthError(err) ? `${err.code}: ${err.message}` : e.message;
}

/** The promise, or a rejection when the signal fires first (the request itself runs on, unobserved). */
function withSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? new BerthError('INTERNAL', 'aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
