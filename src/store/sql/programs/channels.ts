/**
 * Channels: their configuration, the lease of the one host process that polls each, and the
 * inbound commit (cursor + enqueued message, or a refusal, in one transaction, fenced by
 * the lease and the cursor). The outbox is channel-outbox.ts.
 *
 * A chat command (`/status`, `/interrupt`) is answered in the same transaction, through the
 * outbox, and never enqueued.
 *
 * Invariant: an update is applied at most once (the cursor only moves forward, inside the
 * transaction that applies it).
 */
import {
  BerthError,
  BY_CREATION,
  CHANNEL_EVENT_KEEP_MS,
  CHANNEL_REFUSAL_TEXT,
  type Channel,
  type ChannelInbound,
  channelFailureText,
  channelInterruptText,
  channelStatusText,
  decideChannelInbound,
  type EmailSettings,
  type InboundDecision,
  type PageRequest,
} from '../../../core/index.js';
import type { NewChannel } from '../../store.js';
import { pageParams } from '../keyset.js';
import { all, get, type Program, type Row, run, type Tx } from '../program.js';
import { sessionViewOf } from '../session-views.js';
import { ownAgentRow, ownedBy } from './agents.js';
import { insertOutbox } from './channel-outbox.js';
import { checkEnqueue, enqueueMessage } from './sessions.js';
import { requestInterrupt } from './take-back.js';

export function toChannel(r: Row): Channel {
  return {
    id: String(r.id),
    tenant: String(r.tenant),
    platform: String(r.platform) as Channel['platform'],
    agent: String(r.agent),
    mapping: Number(r.per_thread) === 1 ? 'per-thread' : (String(r.mapping) as Channel['mapping']),
    allowUsers: JSON.parse(String(r.allow_users)) as string[],
    allowChats: JSON.parse(String(r.allow_chats)) as string[],
    tokenSecret: String(r.token_secret),
    signingSecret: (r.signing_secret as string | null) ?? null,
    appTokenSecret: (r.app_token_secret as string | null) ?? null,
    webhookUrl: (r.webhook_url as string | null) ?? null,
    respondTo: String(r.respond_to) as Channel['respondTo'],
    email: r.email == null ? null : (JSON.parse(String(r.email)) as EmailSettings),
    paused: Number(r.paused) === 1,
    cursor: Number(r.cursor),
    leaseOwner: (r.lease_owner as string | null) ?? null,
    leaseUntil: Number(r.lease_until),
    lastError: (r.last_error as string | null) ?? null,
    createdAt: Number(r.created_at),
  };
}

function channelNotFound(id: string, operation: string): BerthError {
  return new BerthError('CHANNEL_NOT_FOUND', `Channel ${id} does not exist (${operation})`);
}

export function* createChannel(channel: NewChannel, now: number): Program<Channel> {
  yield* ownAgentRow(channel.agent, channel.tenant, 'createChannel');
  if (yield* get('CHANNEL_BY_ID', { id: channel.id }))
    throw new BerthError('CHANNEL_EXISTS', `Channel ${channel.id} already exists (createChannel)`);
  yield* run('INSERT_CHANNEL', {
    ...channel,
    allowUsers: JSON.stringify(channel.allowUsers),
    allowChats: JSON.stringify(channel.allowChats),
    mapping: channel.mapping === 'per-thread' ? 'per-chat' : channel.mapping,
    perThread: channel.mapping === 'per-thread' ? 1 : 0,
    email: channel.email === null ? null : JSON.stringify(channel.email),
    now,
  });
  return toChannel((yield* get('CHANNEL_BY_ID', { id: channel.id }))!);
}

export function* listChannels(tenant: string | undefined, page?: PageRequest): Program<Channel[]> {
  return (yield* all('ALL_CHANNELS', { tenant: tenant ?? null, ...pageParams(BY_CREATION, page) })).map(
    toChannel,
  );
}

export function* getChannel(id: string, tenant: string | undefined): Program<Channel | null> {
  const row = yield* get('CHANNEL_BY_ID', { id });
  return row && ownedBy(row, tenant) ? toChannel(row) : null;
}

export function* pauseChannel(id: string, paused: boolean, tenant: string | undefined): Program<Channel> {
  const row = yield* get('CHANNEL_BY_ID', { id });
  if (!row || !ownedBy(row, tenant)) throw channelNotFound(id, 'pauseChannel');
  yield* run('SET_CHANNEL_PAUSED', { id, paused: paused ? 1 : 0 });
  return toChannel((yield* get('CHANNEL_BY_ID', { id }))!);
}

export function* deleteChannel(id: string, now: number, tenant: string | undefined): Program<boolean> {
  const row = yield* get('CHANNEL_BY_ID', { id });
  if (!row || !ownedBy(row, tenant)) return false;
  return (yield* run('DELETE_CHANNEL', { id, now })) === 1;
}

/** The caller holds the channel's lease until `now + leaseMs`; false when another does (or it is paused or gone). */
export function* takeChannelLease(id: string, owner: string, now: number, leaseMs: number): Program<boolean> {
  return (yield* run('TAKE_CHANNEL_LEASE', { id, owner, now, leaseUntil: now + leaseMs })) === 1;
}

export function* releaseChannelLease(id: string, owner: string): Program<void> {
  yield* run('RELEASE_CHANNEL_LEASE', { id, owner });
}

export function* recordChannelError(id: string, error: string | null): Program<void> {
  yield* run('SET_CHANNEL_ERROR', { id, error });
}

export type InboundOutcome = InboundDecision['action'] | 'stale';

/**
 * One update applied: the cursor moved past it and, in the same transaction, its message
 * enqueued (the session created and bound to the chat on first use), its refusal written
 * to the outbox, or nothing. 'stale' (nothing written) when the caller lost the lease or
 * the update is behind the cursor: applied already.
 */
export function* commitChannelInbound(
  tx: Tx,
  channelId: string,
  owner: string,
  inbound: ChannelInbound,
  now: number,
  leaseMs: number,
): Program<InboundOutcome> {
  const row = yield* get('CHANNEL_FENCE', { id: channelId, owner, now, updateId: inbound.updateId });
  if (!row) return 'stale';
  if ((yield* run('ADVANCE_CHANNEL_CURSOR', { id: channelId, cursor: inbound.updateId + 1 })) !== 1)
    return 'stale';
  return yield* applyChannelInbound(tx, toChannel(row), inbound, now, leaseMs);
}

/**
 * One pushed event (Slack's Events API) applied in one transaction: its id marked applied
 * and, with it, what commitChannelInbound does for an update (or nothing, when `inbound`
 * is null: an event that carries no message). 'duplicate' when the id was applied before
 * (a retried delivery, within CHANNEL_EVENT_KEEP_MS), 'stale' when the channel is gone or
 * paused: nothing written.
 */
export function* commitChannelEvent(
  tx: Tx,
  channelId: string,
  eventId: string,
  inbound: ChannelInbound | null,
  now: number,
  leaseMs: number,
): Program<InboundOutcome | 'duplicate'> {
  const row = yield* get('CHANNEL_ACCEPTING', { id: channelId });
  if (!row) return 'stale';
  yield* run('PRUNE_CHANNEL_EVENTS', { channelId, before: now - CHANNEL_EVENT_KEEP_MS });
  if ((yield* run('INSERT_CHANNEL_EVENT', { channelId, eventId, now })) !== 1) return 'duplicate';
  if (inbound === null) return 'ignore';
  return yield* applyChannelInbound(tx, toChannel(row), inbound, now, leaseMs);
}

export function* recentChannelChats(channelId: string, since: number, limit: number): Program<string[]> {
  return (yield* all('RECENT_CHANNEL_CHATS', { channelId, since, limit })).map((r) => String(r.chat_id));
}

export function* channelEventApplied(channelId: string, eventId: string): Program<boolean> {
  return (yield* get('CHANNEL_EVENT_APPLIED', { channelId, eventId })) !== undefined;
}

/** An inbound message's effect, once its cursor or event id is fenced: enqueued, refused, or nothing. */
function* applyChannelInbound(
  tx: Tx,
  channel: Channel,
  inbound: ChannelInbound,
  now: number,
  leaseMs: number,
): Program<InboundDecision['action']> {
  const channelId = channel.id;
  const refusal = yield* get('CHANNEL_REFUSAL', { channelId, chatId: inbound.chatId });
  const decision = decideChannelInbound(channel, inbound, refusal ? Number(refusal.last_at) : null, now);
  const refuseInReply = (text: string) =>
    insertOutbox(tx, channelId, inbound.chatId, 'refusal', null, text, inbound.messageId, now);
  switch (decision.action) {
    case 'enqueue': {
      const input = {
        sessionId: decision.sessionId,
        agent: channel.agent,
        tenant: channel.tenant,
        text: inbound.text,
        ...(inbound.files?.length ? { data: { inbox: inbound.files } } : {}),
        now,
      };
      // A message its session refuses (archived, agent gone) still moves the cursor: the
      // chat is told the code once, instead of the update blocking every later one.
      const failure = yield* checkEnqueue(input, tx.operation);
      if (failure) {
        yield* insertOutbox(
          tx,
          channelId,
          inbound.chatId,
          'failure',
          null,
          channelFailureText(failure.code),
          inbound.messageId,
          now,
        );
        return 'refuse';
      }
      const { message } = yield* enqueueMessage(tx, input, leaseMs);
      yield* run('BIND_CHANNEL_SESSION', {
        sessionId: decision.sessionId,
        channelId,
        chatId: inbound.chatId,
        now,
      });
      yield* run('INSERT_CHANNEL_MESSAGE', {
        messageId: message.id,
        channelId,
        chatId: inbound.chatId,
        platformMessageId: inbound.messageId,
        updateId: inbound.updateId,
      });
      // A file left out: the user is told in the same transaction (kind refusal: refused content).
      if (inbound.notice) yield* refuseInReply(inbound.notice);
      break;
    }
    case 'command':
      yield* insertOutbox(
        tx,
        channelId,
        inbound.chatId,
        'reply',
        null,
        yield* runChannelCommand(tx, channel, decision, now, leaseMs),
        inbound.messageId,
        now,
      );
      break;
    case 'refuse':
      yield* run('UPSERT_CHANNEL_REFUSAL', { channelId, chatId: inbound.chatId, now });
      yield* refuseInReply(CHANNEL_REFUSAL_TEXT);
      break;
    case 'ignore':
      break;
  }
  return decision.action;
}

/**
 * A chat command run in the inbound transaction, for the chat's session: `/status` reads its
 * view; `/interrupt` asks its running turn to stop, as POST /v1/sessions/:id/interrupt does
 * (requestInterrupt), when there is one. Returns the text answered.
 */
function* runChannelCommand(
  tx: Tx,
  channel: Channel,
  decision: Extract<InboundDecision, { action: 'command' }>,
  now: number,
  leaseMs: number,
): Program<string> {
  const { sessionId } = decision;
  if (decision.command === 'status') return channelStatusText(yield* sessionViewOf(sessionId, now, leaseMs));
  const running = (yield* get('SESSION_BY_ID', { id: sessionId }))
    ? yield* get('RUNNING_TURN_OF_SESSION', { sessionId })
    : undefined;
  if (!running) return channelInterruptText('nothing-running');
  if (running.interrupt_requested_at != null) return channelInterruptText('already-interrupting');
  yield* requestInterrupt(tx, { sessionId, now, tenant: channel.tenant });
  return channelInterruptText('interrupted');
}
