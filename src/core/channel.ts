/**
 * Channels as the store and the API see them: a chat platform's bot bound to one agent.
 * Pure types and the rules every platform shares (which session a chat message goes to,
 * who may talk to the agent, how a long reply is cut); the platforms themselves live in
 * src/channels/.
 */
import { type ChannelCommand, parseChannelCommand } from './channel-command.js';
import type { InboxFile } from './inbox.js';

export const CHANNEL_PLATFORMS = ['telegram', 'slack', 'discord', 'email'] as const;
export type ChannelPlatform = (typeof CHANNEL_PLATFORMS)[number];

/** How a platform's sessions are named: `<prefix>-<channel>-<chat>`. */
const SESSION_PREFIX: Record<ChannelPlatform, string> = {
  telegram: 'tg',
  slack: 'sl',
  discord: 'dc',
  email: 'em',
};

/** How a mail connection is protected: TLS from the first byte, STARTTLS after the greeting, or none (plain text, the password too). */
export const MAIL_SECURITY = ['tls', 'starttls', 'none'] as const;
export type MailSecurity = (typeof MAIL_SECURITY)[number];

/** Where an email channel reads (IMAP) and sends (SMTP); the password is the channel's token secret. */
export interface EmailSettings {
  /** The bot's address: the From of every reply, and where its own copies arrive. */
  address: string;
  /** The login of both servers. */
  user: string;
  imapHost: string;
  imapPort: number;
  imapSecurity: MailSecurity;
  /** The mailbox read (and acknowledged, by \Seen). */
  mailbox: string;
  smtpHost: string;
  smtpPort: number;
  smtpSecurity: MailSecurity;
}

/**
 * per-chat: one session per chat (a group shares one); per-user: one per user in each
 * chat; per-thread: one per thread (a message outside a thread starts one), on platforms
 * with threads (Slack); elsewhere the same as per-chat.
 */
export const CHANNEL_MAPPINGS = ['per-chat', 'per-user', 'per-thread'] as const;
export type ChannelMapping = (typeof CHANNEL_MAPPINGS)[number];

/** all: every message in a chat the bot is in reaches the agent; mention: in group chats, only messages naming the bot. */
export const CHANNEL_RESPOND = ['all', 'mention'] as const;
export type ChannelRespond = (typeof CHANNEL_RESPOND)[number];

export interface Channel {
  id: string;
  tenant: string;
  platform: ChannelPlatform;
  agent: string;
  mapping: ChannelMapping;
  /** Users allowed: `@username` or a numeric user id. Empty = nobody (unless the chat is allowed). */
  allowUsers: string[];
  /** Chats allowed (numeric ids): every member of such a chat may talk. */
  allowChats: string[];
  /** The name, in the host's secret store, of the bot token. The value never leaves the host. */
  tokenSecret: string;
  /**
   * The name, in the host's secret store, of the secret that proves a pushed request is the
   * platform's (Slack's signing secret; Telegram's webhook `secret_token`); null when nothing is pushed over HTTP.
   */
  signingSecret: string | null;
  /** Slack Socket Mode: the name, in the host's secret store, of the app-level token (`xapp-…`); null = the Events API over HTTP. */
  appTokenSecret: string | null;
  /** Telegram webhook mode: berth's public base URL, where Telegram POSTs updates; null = long polling. */
  webhookUrl: string | null;
  /** Which group messages reach the agent: all, or only those naming the bot. */
  respondTo: ChannelRespond;
  /** An email channel's servers and address; null on a chat platform. */
  email: EmailSettings | null;
  paused: boolean;
  /** The next platform offset to ask for (Telegram: the last committed update_id + 1). */
  cursor: number;
  /** The host process polling it now, while its lease lasts. */
  leaseOwner: string | null;
  leaseUntil: number;
  lastError: string | null;
  createdAt: number;
}

export type ChannelOutboxKind = 'reply' | 'failure' | 'refusal';
export type ChannelOutboxStatus = 'pending' | 'sent' | 'dead';

/** One send owed to a chat: a reply (maybe in several parts), a failure notice or a refusal. */
export interface ChannelOutboxItem {
  id: number;
  channelId: string;
  chatId: string;
  kind: ChannelOutboxKind;
  eventId: number | null;
  text: string;
  /** The platform's id of the message this answers, or null. */
  replyTo: string | null;
  /** A file to send (as a document) instead of the text; null for a text. */
  file: InboxFile | null;
  status: ChannelOutboxStatus;
  attempts: number;
  nextAttemptAt: number;
  /** Parts already sent and recorded (a long reply is cut into several). */
  partsSent: number;
  platformMessageIds: string[];
  lastError: string | null;
  createdAt: number;
  sentAt: number | null;
}

/** An inbound chat message as every platform reports it. */
export interface ChannelInbound {
  /** The platform's cursor of this update (Telegram's update_id); 0 on a platform that pushes (Slack: events are keyed by their id instead). */
  updateId: number;
  chatId: string;
  /** private, group, … as the platform names it. */
  chatType: string;
  userId: string;
  username: string | null;
  /** The platform's id of the message (the reply answers it). */
  messageId: string;
  /** The thread the message is in (Slack: its root's ts; a message outside a thread roots one); null without threads. */
  threadId: string | null;
  text: string;
  /** Files sent with it (Telegram: a document or a photo), as the platform names them; not fetched yet. */
  attachments?: ChannelAttachment[];
  /** Set by the runner before the commit: the files it stored as blobs, named in the message's data. */
  files?: InboxFile[];
  /** Set by the runner before the commit: one short message owed to the user (a file left out). */
  notice?: string;
}

/** A file sent with a message, as the platform names it (fetched with PlatformClient.download). */
export interface ChannelAttachment {
  /** The platform's id of the file (Telegram: its file_id, which getFile resolves). */
  id: string;
  /** Its name as sent, or one made up (a photo has none); made safe before use. */
  name: string;
  /** Its size as the platform reports it, when it does. */
  sizeBytes: number | null;
  /** Where the platform serves its bytes (Slack: url_private_download; Discord: the CDN URL); absent where the id is enough. */
  url?: string;
}

/** How long a pushed event's id is kept to spot a retried delivery: Slack retries for about an hour at most. */
export const CHANNEL_EVENT_KEEP_MS = 24 * 60 * 60_000;

/** A refusal to the same chat at most once in this time. */
export const CHANNEL_REFUSAL_INTERVAL_MS = 10 * 60_000;

export const CHANNEL_REFUSAL_TEXT =
  'Sorry, this bot only talks to people its owner allowed. Your message was not passed on.';

export type InboundDecision =
  | { action: 'enqueue'; sessionId: string }
  /** A chat command (channel-command.ts): answered by berth for the chat's session, never enqueued. */
  | { action: 'command'; command: ChannelCommand; sessionId: string }
  | { action: 'refuse'; reason: 'not-allowed' }
  | { action: 'ignore'; reason: 'not-allowed-refused-lately' | 'empty' };

/** The session a chat message goes to: stable, so every message of a chat (or user) finds it. */
export function channelSessionId(
  channel: Pick<Channel, 'id' | 'mapping' | 'platform'>,
  chatId: string,
  userId: string,
  threadId: string | null = null,
): string {
  const safe = (id: string) => id.replace(/[^0-9A-Za-z_-]/g, '_');
  const prefix = `${SESSION_PREFIX[channel.platform]}-${channel.id}-${safe(chatId)}`;
  if (channel.mapping === 'per-user') return `${prefix}-u${safe(userId)}`;
  if (channel.mapping === 'per-thread' && threadId !== null) return `${prefix}-t${safe(threadId)}`;
  return prefix;
}

export function isChannelSenderAllowed(
  channel: Pick<Channel, 'allowUsers' | 'allowChats'>,
  inbound: Pick<ChannelInbound, 'chatId' | 'userId' | 'username'>,
): boolean {
  if (channel.allowChats.includes(inbound.chatId)) return true;
  for (const entry of channel.allowUsers) {
    if (entry.startsWith('@')) {
      if (inbound.username !== null && entry.slice(1).toLowerCase() === inbound.username.toLowerCase())
        return true;
    } else if (entry === inbound.userId) return true;
  }
  return false;
}

/**
 * What one inbound update does: goes to its session, is a chat command for it (an allowed
 * sender's `/status` or `/interrupt`), earns its chat one refusal (at most one per
 * CHANNEL_REFUSAL_INTERVAL_MS), or nothing. Every outcome moves the cursor past it.
 */
export function decideChannelInbound(
  channel: Pick<Channel, 'id' | 'platform' | 'mapping' | 'allowUsers' | 'allowChats' | 'paused'>,
  inbound: ChannelInbound,
  lastRefusalAt: number | null,
  now: number,
): InboundDecision {
  // Updates that carry no text (joins, edits, stickers) move the cursor and nothing else.
  if (inbound.text.trim() === '') return { action: 'ignore', reason: 'empty' };
  if (!isChannelSenderAllowed(channel, inbound)) {
    if (lastRefusalAt !== null && now - lastRefusalAt < CHANNEL_REFUSAL_INTERVAL_MS)
      return { action: 'ignore', reason: 'not-allowed-refused-lately' };
    return { action: 'refuse', reason: 'not-allowed' };
  }
  const sessionId = channelSessionId(channel, inbound.chatId, inbound.userId, inbound.threadId);
  const command = parseChannelCommand(inbound.text);
  if (command !== null) return { action: 'command', command, sessionId };
  return { action: 'enqueue', sessionId };
}

/** The text a failed turn sends its chat: short, with the code. */
export function channelFailureText(code: string): string {
  return `Sorry, that failed (${code}).`;
}

/**
 * A text cut into parts of at most `limit` UTF-16 units (Telegram counts its 4096 so),
 * at the last newline or space in the second half of a part when there is one, never
 * through a surrogate pair. An empty text is one empty part.
 */
export function splitChannelText(text: string, limit: number): string[] {
  const parts: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    let cut = limit;
    const window = rest.slice(0, limit);
    const soft = Math.max(window.lastIndexOf('\n'), window.lastIndexOf(' '));
    if (soft >= limit / 2) cut = soft + 1;
    else {
      const code = rest.charCodeAt(cut - 1);
      if (code >= 0xd800 && code <= 0xdbff) cut -= 1;
    }
    parts.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  parts.push(rest);
  return parts;
}
