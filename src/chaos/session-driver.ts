/**
 * The client side of the chaos workload: one session's turns, sent in bursts through the
 * public API and followed on the session's event stream. A burst (workload.ts,
 * burstSizes) is 2 to 5 turns: its first message is sent, and once that message's turn has
 * started the rest are sent, one POST after another, while that turn runs; then every
 * message of the burst is followed to its outcome, and only then is the next burst sent.
 * Every request ends in exactly one Jepsen outcome:
 *   ok       its reply arrived (a `reply` event whose inReplyTo has the message id)
 *   fail     berth said it failed (a `failed` event for it, or a 4xx refusing the POST)
 *   unknown  we cannot tell (timeout, stream or connection error, run cut short): the
 *            message may or may not have been processed
 *
 * Invariants:
 * - Messages are sent in turn order, each POST once the one before it was acknowledged, so
 *   the store accepts them in that order (their ids ascend with their turns).
 * - A session sends its next burst only after every message of the burst before ended ok.
 *   After a fail or unknown nothing more is sent (the next plans would assert on a state
 *   nobody can predict); the messages of its burst already sent are still followed to an
 *   outcome, and the turns never sent are counted.
 * - The first message's turn is the only one running when the rest of its burst is sent:
 *   every earlier message had been answered before the burst began, so the first `started`
 *   event after its POST is its turn's.
 * - A burst is bounded by the run's abort signal, and what of it has not ended ends unknown
 *   once berth said nothing about the session for `messageTimeoutMs` (no answer to a POST,
 *   no event on its stream): a message queued behind others gets its position, so a slow
 *   machine's long queue is latency, not a timeout.
 */

import type { ApiClient, StreamedEvent } from '../client/index.js';
import { BerthError, isBerthError, type ReplyScope, type ScriptPlan } from '../core/index.js';
import { burstSizes, turnPlan, type WorkloadOptions } from './workload.js';

export type Outcome = 'ok' | 'fail' | 'unknown';

export interface RequestRecord {
  session: string;
  turn: number;
  /** null when the POST itself got no answer. */
  messageId: number | null;
  outcome: Outcome;
  /** Why it was not ok; '' for ok. */
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
  /** The reply the client took for this message (ok only). */
  reply: ReceivedReply | null;
  /** The error code of the `failed` event the client saw for it (fail by that event only). */
  failedCode: string | null;
}

export interface ReceivedReply {
  /** The reply's own id (its outbound message in the store). */
  id: number;
  /** The messages it names, and whether it answers each one alone or a whole turn. */
  inReplyTo: number[];
  scope: ReplyScope;
  data: unknown;
  /** Its place among the `reply` events the session's client received, 1-based: their order of arrival. */
  arrival: number;
}

export interface DriverContext {
  client: ApiClient;
  agent: string;
  turns: number;
  seed: number;
  messageTimeoutMs: number;
  /** What each message asks for: its text is this plan. @default turnPlan (a script agent's) */
  plan?: (sessionIndex: number, turn: number, opts: WorkloadOptions) => ScriptPlan;
  /** Aborted when the run is cut (duration cap) or torn down. */
  abort: AbortSignal;
  onRecord(record: RequestRecord): void;
}

/** The session a driver sends to, and the replies its client received so far. */
interface SessionClient {
  id: string;
  index: number;
  repliesReceived: number;
}

/** A message being followed: what its record will say. */
interface Followed {
  session: string;
  turn: number;
  messageId: number | null;
  sentAt: number;
  retriesSeen: number;
  eventsSeen: number;
  lastEvent: string | null;
}

/** Sends turns 1..T of one session, burst by burst; returns how many were never sent. */
export async function driveSession(
  ctx: DriverContext,
  sessionIndex: number,
  session: string,
): Promise<number> {
  const client: SessionClient = { id: session, index: sessionIndex, repliesReceived: 0 };
  let sent = 0;
  for (const size of burstSizes(ctx.turns, ctx.seed, sessionIndex)) {
    if (ctx.abort.aborted) break;
    const turns = Array.from({ length: size }, (_, i) => sent + 1 + i);
    const records = await driveBurst(ctx, client, turns);
    sent += records.length;
    if (records.some((r) => r.outcome !== 'ok')) break;
  }
  return ctx.turns - sent;
}

/** One burst, sent and followed; a record for each message sent (those after a fail are not). */
async function driveBurst(ctx: DriverContext, client: SessionClient, turns: number[]) {
  const records: RequestRecord[] = [];
  const end = (record: RequestRecord) => {
    records.push(record);
    ctx.onRecord(record);
  };
  const deadline = messageDeadline(ctx.abort, ctx.messageTimeoutMs);
  try {
    await followBurst(ctx, client, turns, deadline, end);
  } finally {
    deadline.clear();
  }
  return records;
}

async function followBurst(
  ctx: DriverContext,
  client: SessionClient,
  [first, ...rest]: number[],
  deadline: MessageDeadline,
  end: (record: RequestRecord) => void,
): Promise<void> {
  const posted = await post(ctx, client, first!, deadline);
  if ('record' in posted) return end(posted.record);
  const open = new Map([[posted.followed.messageId, posted.followed]]);
  let firstOutcome: Outcome | null = null;
  let restDue = rest.length > 0;
  let reason = 'event stream ended before the reply';
  try {
    for await (const e of ctx.client.events(client.id, posted.eventId, deadline.signal)) {
      deadline.heard();
      if (e.type === 'reply') client.repliesReceived++;
      for (const m of [...open.values()]) {
        const record = settle(m, e, client);
        if (!record) continue;
        open.delete(m.messageId);
        if (m === posted.followed) firstOutcome = record.outcome;
        end(record);
      }
      if (restDue && (e.type === 'started' || firstOutcome !== null)) {
        restDue = false;
        // Only the first message has been sent: if it ended before its turn was seen starting, and not ok, nothing more is.
        if (firstOutcome === null || firstOutcome === 'ok')
          await postRest(ctx, client, rest, deadline, open, end);
      }
      if (!restDue && open.size === 0) return;
    }
  } catch (err) {
    reason = `events: ${describe(err, ctx.abort)}`;
  }
  for (const m of open.values()) end(ended(m, 'unknown', reason));
}

/** The rest of a burst, one POST after another (so they are accepted in turn order), up to the first that is not acknowledged. */
async function postRest(
  ctx: DriverContext,
  client: SessionClient,
  turns: number[],
  deadline: MessageDeadline,
  open: Map<number | null, Followed>,
  end: (record: RequestRecord) => void,
): Promise<void> {
  for (const turn of turns) {
    const posted = await post(ctx, client, turn, deadline);
    if ('record' in posted) return end(posted.record);
    open.set(posted.followed.messageId, posted.followed);
  }
}

async function post(
  ctx: DriverContext,
  client: SessionClient,
  turn: number,
  deadline: MessageDeadline,
): Promise<{ followed: Followed; eventId: number } | { record: RequestRecord }> {
  const sent: Followed = {
    session: client.id,
    turn,
    messageId: null,
    sentAt: Date.now(),
    retriesSeen: 0,
    eventsSeen: 0,
    lastEvent: null,
  };
  const text = JSON.stringify(
    (ctx.plan ?? turnPlan)(client.index, turn, { session: client.id, seed: ctx.seed }),
  );
  try {
    const posted = await withSignal(
      ctx.client.request<{ message: { id: number }; eventId: number }>(
        'POST',
        `/v1/sessions/${encodeURIComponent(client.id)}/messages`,
        { agent: ctx.agent, text },
      ),
      deadline.signal,
    );
    deadline.heard();
    return { followed: { ...sent, messageId: posted.message.id }, eventId: posted.eventId };
  } catch (err) {
    // A 4xx is a definite refusal; anything else (no answer, 5xx, timeout) may have been accepted.
    const refused = isBerthError(err) && err.status >= 400 && err.status < 500;
    return { record: ended(sent, refused ? 'fail' : 'unknown', `POST: ${describe(err, ctx.abort)}`) };
  }
}

/** The message's record if this event of its session ends it; else null, having counted the event. */
function settle(m: Followed, e: StreamedEvent, client: SessionClient): RequestRecord | null {
  const d = e.data;
  m.eventsSeen++;
  m.lastEvent = e.type;
  if (e.type === 'retrying' && d.messageId === m.messageId) m.retriesSeen++;
  if (e.type === 'failed' && d.messageId === m.messageId)
    return ended(m, 'fail', String(d.error), { failedCode: typeof d.code === 'string' ? d.code : null });
  const inReplyTo = e.type === 'reply' && Array.isArray(d.inReplyTo) ? (d.inReplyTo as number[]) : [];
  if (m.messageId === null || !inReplyTo.includes(m.messageId)) return null;
  return ended(m, 'ok', '', {
    replyText: String(d.text),
    reply: {
      id: Number(d.messageId),
      inReplyTo,
      scope: d.scope === 'message' ? 'message' : 'turn',
      data: d.data ?? null,
      arrival: client.repliesReceived,
    },
  });
}

function ended(
  m: Followed,
  outcome: Outcome,
  reason: string,
  got: Partial<Pick<RequestRecord, 'replyText' | 'reply' | 'failedCode'>> = {},
): RequestRecord {
  return {
    ...m,
    outcome,
    reason,
    endedAt: Date.now(),
    replyText: null,
    reply: null,
    failedCode: null,
    ...got,
  };
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
