/**
 * A channel's outbox: every send owed to a chat, written in the transaction of what it
 * answers (a reply or failure event, a refusal or a command's answer in the inbound's
 * commit, the files a turn wrote in its commit), taken by the lease holder's send loop and
 * recorded part by part with the platform's message id, fenced by the attempt.
 *
 * Invariant: a reply or failure event of a chat-bound session has exactly one outbox row,
 * written in the event's own transaction.
 */
import {
  BY_SEQ,
  type ChannelOutboxItem,
  channelFailureText,
  type InboxFile,
  type PageRequest,
  type SessionEventType,
} from '../../../core/index.js';
import { pageParams } from '../keyset.js';
import { all, get, type Program, type Row, run, type Tx } from '../program.js';

export function toOutboxItem(r: Row): ChannelOutboxItem {
  return {
    id: Number(r.id),
    channelId: String(r.channel_id),
    chatId: String(r.chat_id),
    kind: String(r.kind) as ChannelOutboxItem['kind'],
    eventId: r.event_id == null ? null : Number(r.event_id),
    text: String(r.text),
    replyTo: (r.reply_to as string | null) ?? null,
    file: r.file == null ? null : (JSON.parse(String(r.file)) as InboxFile),
    status: String(r.status) as ChannelOutboxItem['status'],
    attempts: Number(r.attempts),
    nextAttemptAt: Number(r.next_attempt_at),
    partsSent: Number(r.parts_sent),
    platformMessageIds: JSON.parse(String(r.platform_message_ids)) as string[],
    lastError: (r.last_error as string | null) ?? null,
    createdAt: Number(r.created_at),
    sentAt: r.sent_at == null ? null : Number(r.sent_at),
  };
}

export function* insertOutbox(
  tx: Tx,
  channelId: string,
  chatId: string,
  kind: ChannelOutboxItem['kind'],
  eventId: number | null,
  text: string,
  replyTo: string | null,
  now: number,
  file: InboxFile | null = null,
): Program<void> {
  const fileJson = file === null ? null : JSON.stringify(file);
  yield* run('INSERT_CHANNEL_OUTBOX', {
    channelId,
    chatId,
    kind,
    eventId,
    text,
    replyTo,
    file: fileJson,
    now,
  });
  tx.changes.push({ type: 'channel-outbox', channelId });
}

/**
 * Called by insertEvent for every event: a reply or failure of a session bound to a chat
 * becomes one outbox row, in the event's transaction. Other events write nothing.
 */
export function* queueChannelSend(
  tx: Tx,
  eventId: number,
  sessionId: string,
  type: SessionEventType,
  data: Record<string, unknown>,
  now: number,
): Program<void> {
  if (type !== 'reply' && type !== 'failed') return;
  // The reply answers the last message it names (the newest one the user sent).
  const answered =
    type === 'reply'
      ? ((data.inReplyTo as number[] | undefined) ?? []).at(-1)
      : (data.messageId as number | undefined);
  const chat = yield* boundChat(sessionId, answered);
  if (!chat) return;
  const { channelId, chatId, replyTo } = chat;
  if (type === 'reply')
    yield* insertOutbox(tx, channelId, chatId, 'reply', eventId, String(data.text ?? ''), replyTo, now);
  else
    yield* insertOutbox(
      tx,
      channelId,
      chatId,
      'failure',
      eventId,
      channelFailureText(String(data.code ?? 'INTERNAL')),
      replyTo,
      now,
    );
}

/**
 * The channel's oldest pending send, taken for one attempt until `now + leaseMs`; null when
 * there is none or it is not due yet (nothing passes it: nextChannelSendAt says when).
 */
export function* takeChannelSend(
  channelId: string,
  owner: string,
  now: number,
  leaseMs: number,
): Program<ChannelOutboxItem | null> {
  const head = yield* get('HEAD_CHANNEL_OUTBOX', { channelId });
  if (!head) return null;
  if ((yield* run('TAKE_CHANNEL_OUTBOX', { id: head.id, owner, now, leaseUntil: now + leaseMs })) !== 1)
    return null;
  return toOutboxItem((yield* get('CHANNEL_OUTBOX_BY_ID', { id: head.id }))!);
}

/** When the channel's oldest pending send is due (it may be taken by this process at once), or null. */
export function* nextChannelSendAt(channelId: string): Program<number | null> {
  const head = yield* get('HEAD_CHANNEL_OUTBOX', { channelId });
  return head ? Number(head.next_attempt_at) : null;
}

/** One part recorded with the platform's id; false when the attempt is stale (nothing written). */
export function* recordChannelPartSent(
  item: Pick<ChannelOutboxItem, 'id' | 'attempts' | 'partsSent' | 'platformMessageIds'>,
  platformMessageId: string,
  done: boolean,
  now: number,
): Program<boolean> {
  return (
    (yield* run('RECORD_CHANNEL_PART_SENT', {
      id: item.id,
      attempt: item.attempts,
      part: item.partsSent,
      platformMessageIds: JSON.stringify([...item.platformMessageIds, platformMessageId]),
      done: done ? 1 : 0,
      now,
    })) === 1
  );
}

/** An attempt that sent nothing more: due again at `nextAttemptAt`, or dead (null). */
export function* endChannelSendAttempt(
  item: Pick<ChannelOutboxItem, 'id' | 'attempts'>,
  nextAttemptAt: number | null,
  error: string,
  now: number,
): Program<void> {
  yield* run('END_CHANNEL_OUTBOX_ATTEMPT', {
    id: item.id,
    attempt: item.attempts,
    status: nextAttemptAt === null ? 'dead' : 'pending',
    nextAttemptAt: nextAttemptAt ?? now,
    error,
  });
}

export function* listChannelOutbox(channelId: string, page?: PageRequest): Program<ChannelOutboxItem[]> {
  return (yield* all('CHANNEL_OUTBOX_OF_CHANNEL', { channelId, ...pageParams(BY_SEQ, page) })).map(
    toOutboxItem,
  );
}

/** Where a session's sends go: its channel and chat, and the platform's id of message `answered` (null when unknown). */
function* boundChat(
  sessionId: string,
  answered: number | undefined,
): Program<{ channelId: string; chatId: string; replyTo: string | null } | null> {
  const bound = yield* get('CHANNEL_SESSION', { sessionId });
  if (!bound) return null;
  const platform =
    answered === undefined ? undefined : yield* get('CHANNEL_MESSAGE', { messageId: answered });
  return {
    channelId: String(bound.channel_id),
    chatId: String(bound.chat_id),
    replyTo: platform ? String(platform.platform_message_id) : null,
  };
}

/**
 * Called by commitTurn: the files a committed turn wrote under outbox/ (already stored as
 * blobs), one outbox row each after its replies, when the session is bound to a chat.
 */
export function* queueChannelFiles(
  tx: Tx,
  sessionId: string,
  files: InboxFile[],
  answered: number | undefined,
  now: number,
): Program<void> {
  const chat = yield* boundChat(sessionId, answered);
  if (!chat) return;
  for (const file of files)
    yield* insertOutbox(tx, chat.channelId, chat.chatId, 'reply', null, '', chat.replyTo, now, file);
}
