/**
 * Waiting for the reply to one posted message: the session's event stream followed from
 * the post's 'queued' event, resumed after a break (an API process stopped or died behind
 * a balancer) or an overflow, until the reply that answers the message, its failure, or
 * the session being held or archived.
 */
import {
  BerthError,
  isBerthError,
  isErrorCode,
  type Message,
  type ReplyScope,
  type SessionView,
} from '../core/index.js';
import type { StreamedEvent } from './http.js';

/** How long a broken event stream is retried with no host answering before waitForReply gives up. */
const RECONNECT_FOR_MS = 30_000;
const RECONNECT_PAUSE_MS = 250;

export interface Posted {
  message: Message;
  session: SessionView;
  /** Id of the 'queued' event the post wrote: follow the session's events after it. */
  eventId: number;
}

export interface Reply {
  text: string;
  data: unknown;
  /** The reply's own id (an outbound message). */
  messageId: number;
  /** The messages it answers: the one posted (scope 'message'), or every message its turn took (scope 'turn'). */
  inReplyTo: number[];
  scope: ReplyScope;
}

export interface SendOptions {
  /** The agent of a new session. */
  agent?: string;
  /** Called with every event of the session while waiting (queued, started, progress, retrying...). */
  onEvent?: (event: StreamedEvent) => void;
  signal?: AbortSignal;
}

/**
 * Follows the session's events from the post's 'queued' event until the reply that answers
 * this message (a per-message provider's own reply to it, or a model turn's reply to all it
 * took), its failure, or the session being held. Replies to the session's other messages pass by.
 */
export async function waitForReply(
  events: (after: number, signal: AbortSignal | undefined) => AsyncGenerator<StreamedEvent>,
  id: string,
  posted: Posted,
  options: SendOptions,
): Promise<Reply> {
  const messageId = posted.message.id;
  let from = posted.eventId;
  // A stream that breaks (its API process stopped or died behind a balancer) is followed
  // again from the last event seen, on whichever process answers, for as long as one does.
  let lostSince: number | null = null;
  for (;;) {
    const stream = events(from, options.signal);
    let resumeNow = false;
    try {
      for await (const e of stream) {
        lostSince = null;
        // The server cut a stream this process did not read fast enough: resume where it says.
        if (e.type === 'overflow') {
          from = Number(e.data.lastEventId);
          resumeNow = true;
          break;
        }
        if (e.id !== null) from = e.id;
        const outcome = outcomeFor(id, messageId, e, options);
        if (outcome) return outcome;
      }
    } catch (err) {
      if (!isBerthError(err, 'HOST_UNREACHABLE')) throw err;
    }
    if (resumeNow) continue;
    lostSince ??= Date.now();
    if (Date.now() - lostSince > RECONNECT_FOR_MS)
      throw new BerthError(
        'HOST_UNREACHABLE',
        `Event stream of session ${id} ended before the reply, and no berth host answered for ${RECONNECT_FOR_MS / 1000} s`,
      );
    await new Promise((r) => setTimeout(r, RECONNECT_PAUSE_MS));
  }
}

/** What one event of the session means for the message waited on: its reply, an error to throw, or nothing. */
function outcomeFor(
  id: string,
  messageId: number,
  e: StreamedEvent,
  options: SendOptions,
): Reply | undefined {
  options.onEvent?.(e);
  const d = e.data;
  const inReplyTo = e.type === 'reply' ? (d.inReplyTo as number[]) : [];
  if (inReplyTo.includes(messageId)) {
    const scope = d.scope === 'message' ? 'message' : 'turn';
    return { text: String(d.text), data: d.data, messageId: Number(d.messageId), inReplyTo, scope };
  }
  if (e.type === 'failed' && d.messageId === messageId) {
    // The failure's own code, so its hint says what happened (a limit the turn hit is not retried).
    throw new BerthError(
      isErrorCode(d.code) ? d.code : 'SANDBOX_FAILED',
      `Message ${messageId} failed after ${d.tries} ${d.tries === 1 ? 'try' : 'tries'}: ${String(d.error)}`,
    );
  }
  if (e.type === 'interrupted' && d.messageId === messageId)
    throw new BerthError(
      'TURN_INTERRUPTED',
      `Message ${messageId}'s turn was interrupted: ${String(d.error)}`,
    );
  if (e.type === 'cancelled' && d.messageId === messageId)
    throw new BerthError('MESSAGE_CANCELLED', `Message ${messageId} was cancelled before it ran`);
  // The session is held (its messages kept, the one posted too, whether it was in the turn or waits behind it).
  if (e.type === 'held') {
    throw new BerthError(
      isErrorCode(d.code) ? d.code : 'SANDBOX_FAILED',
      `Session ${id} is held; message ${messageId} is kept until an operator acts: ${String(d.error)}`,
    );
  }
  if (e.type === 'archived') {
    throw new BerthError(
      'SESSION_ARCHIVED',
      `Session ${id} was archived before message ${messageId} was answered`,
    );
  }
  return undefined;
}
