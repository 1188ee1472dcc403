/**
 * Discord's wire shapes, pure: a Gateway frame parsed, a message as berth's inbound (or
 * nobody's) with its files, a send's nonce, a moment as a snowflake. No I/O (discord.ts does that).
 */
import { createHash } from 'node:crypto';
import type { Channel, ChannelAttachment, ChannelInbound } from '../core/index.js';
import { jsonObjectOf } from './channel.js';

/** The longest nonce Discord accepts. */
export const DISCORD_NONCE_MAX = 25;
/** Snowflakes count milliseconds from here. */
const DISCORD_EPOCH_MS = 1_420_070_400_000n;

/** A Gateway frame: op code, data, and for dispatches (op 0) the sequence and event name. */
export interface GatewayFrame {
  op: number;
  d: unknown;
  s: number | null;
  t: string | null;
}

export interface DiscordMessage {
  id: string;
  channel_id: string;
  guild_id?: string;
  type?: number;
  content?: string;
  author?: { id: string; username?: string; bot?: boolean };
  mentions?: { id: string }[];
  /** The files sent with it, each fetched from Discord's CDN at its `url`. */
  attachments?: { id: string; filename: string; size?: number; url: string }[];
}

/** A frame read off the socket, or null when it is not one (not JSON, no numeric op). */
export function parseGatewayFrame(raw: unknown): GatewayFrame | null {
  const f = jsonObjectOf(raw);
  if (f === null || typeof f.op !== 'number') return null;
  return {
    op: f.op,
    d: f.d ?? null,
    s: typeof f.s === 'number' ? f.s : null,
    t: typeof f.t === 'string' ? f.t : null,
  };
}

/**
 * What one Discord message is for this channel, or null when it reaches nobody: a bot's
 * (this one's included), a system message (joins, pins), or, with `respondTo: 'mention'`,
 * a guild message that does not mention the bot (direct messages always reach it). The
 * mention is cut from the text. A thread is a channel of its own on Discord, so per-chat
 * already gives each thread its session.
 */
export function toDiscordInbound(
  channel: Pick<Channel, 'respondTo'>,
  botUserId: string | null,
  message: unknown,
): ChannelInbound | null {
  if (typeof message !== 'object' || message === null) return null;
  const m = message as DiscordMessage;
  if (typeof m.id !== 'string' || typeof m.channel_id !== 'string' || !m.author) return null;
  if (m.author.bot || m.author.id === botUserId) return null;
  // 0: a message, 19: a reply; the rest are system messages.
  if (m.type !== undefined && m.type !== 0 && m.type !== 19) return null;
  const inGuild = m.guild_id !== undefined;
  const mentioned = botUserId !== null && (m.mentions ?? []).some((u) => u.id === botUserId);
  if (channel.respondTo === 'mention' && inGuild && !mentioned) return null;
  const text =
    botUserId === null
      ? (m.content ?? '')
      : (m.content ?? '').replaceAll(`<@${botUserId}>`, '').replaceAll(`<@!${botUserId}>`, '');
  return {
    updateId: 0,
    chatId: m.channel_id,
    chatType: inGuild ? 'guild' : 'dm',
    userId: m.author.id,
    username: m.author.username ?? null,
    messageId: m.id,
    threadId: null,
    text: text.trim(),
    ...(m.attachments?.length ? { attachments: attachmentsOf(m.attachments) } : {}),
  };
}

/** Each file by its id, its name and the CDN URL it is fetched from. */
function attachmentsOf(files: NonNullable<DiscordMessage['attachments']>): ChannelAttachment[] {
  return files
    .filter((f) => typeof f.url === 'string')
    .map((f) => ({
      id: String(f.id),
      url: f.url,
      name: typeof f.filename === 'string' ? f.filename : `attachment-${f.id}`,
      sizeBytes: typeof f.size === 'number' ? f.size : null,
    }));
}

/** The nonce of a send: berth's key when it fits Discord's 25 characters, else its hash. */
export function discordNonce(channelId: string, key: string): string {
  const whole = `${channelId}:${key}`;
  if (whole.length <= DISCORD_NONCE_MAX) return whole;
  return createHash('sha256').update(whole).digest('base64url').slice(0, DISCORD_NONCE_MAX);
}

/** The smallest snowflake of a moment: `after=` it reads every message from then on. */
export function snowflakeAt(ms: number): string {
  const since = BigInt(Math.max(0, Math.floor(ms))) - DISCORD_EPOCH_MS;
  return String((since > 0n ? since : 0n) << 22n);
}

export function bySnowflake(a: { id: string }, b: { id: string }): number {
  const x = BigInt(a.id);
  const y = BigInt(b.id);
  return x < y ? -1 : x > y ? 1 : 0;
}
