/**
 * Discord: messages come over the Gateway (a WebSocket the lease holder keeps open: HELLO,
 * IDENTIFY or RESUME, heartbeats, dispatches), replies go out over REST (`POST
 * <api>/channels/{id}/messages`, the bot token as `Authorization: Bot …`). No SDK:
 * discord.js queues and retries 429s on its own and resumes out of sight, and the runner
 * must see each 429 to pace the channel, and each dispatch to commit it before moving the
 * sequence it resumes from. The client is Node's own WebSocket (no dependency).
 *
 * Exactly once in: each MESSAGE_CREATE is committed keyed by its message id (the runner's
 * commit is store.commitChannelEvent), and the sequence a RESUME asks from moves only past
 * committed dispatches. A fresh IDENTIFY replays nothing, so after each one the history of
 * every allowlisted channel is read back over REST from a floor (the channel's creation, or
 * the time event ids are kept) and committed under the same keys: what was committed
 * before is a duplicate, what arrived while no connection was open is enqueued once.
 *
 * Out: each part carries a `nonce` derived from berth's key with `enforce_nonce`, so a
 * resend after a crash between send and record, within Discord's nonce window (a few
 * minutes), returns the message first posted instead of posting again. A file back goes
 * the same way, as a multipart create (`payload_json` with the nonce, and `files[0]`).
 *
 * Files in: a message's attachments are fetched from Discord's CDN at their `url` (signed,
 * no token), up to what a bot may upload (channel-inbox.ts stages them before the commit).
 *
 * The token is sent in a header and the IDENTIFY frame only; it is never logged.
 */
import {
  CHANNEL_EVENT_KEEP_MS,
  type Channel,
  type ChannelAttachment,
  type Clock,
  sleep,
} from '../core/index.js';
import {
  asPlatformError,
  type ChannelEvent,
  type ChannelFile,
  type ChannelSecrets,
  type ChannelSend,
  fetchPlatformFile,
  fileBytes,
  type PlatformClient,
  PlatformError,
} from './channel.js';
import {
  bySnowflake,
  type DiscordMessage,
  discordNonce,
  type GatewayFrame,
  parseGatewayFrame,
  snowflakeAt,
  toDiscordInbound,
} from './discord-wire.js';

/** Discord's limit of one message's content. */
export const DISCORD_MAX_TEXT = 2000;
/** The largest file a bot may upload without a boost: what a user's file is fetched up to, too. */
export const DISCORD_MAX_FILE_BYTES = 10 * 2 ** 20;
/** GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT. */
export const DISCORD_INTENTS = (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15);
/** Read back this far inside the window event ids are kept, so a kept id is never outlived. */
const HISTORY_MARGIN_MS = 60 * 60_000;
const ANSWER_TIMEOUT_MS = 15_000;
/** Close codes after which no new connection helps (bad token, bad intents). */
const FATAL_CLOSE = new Set([4004, 4010, 4011, 4012, 4013, 4014]);
/** Close codes after which the session cannot be resumed. */
const NO_RESUME_CLOSE = new Set([4007, 4009]);

/** The recently active chats read back at most, besides the allowlisted ones: one history read each, rate-limited by Discord. */
const READ_BACK_RECENT_CHATS = 100;

export interface DiscordOptions {
  /** e.g. https://discord.com/api/v10 */
  apiUrl: string;
  token: string;
  clock: Clock;
  /**
   * The chats of a channel whose sessions were active since `since` (the store's
   * recentChannelChats): read back besides the allowlisted ones, so a direct message, or a
   * chat reached only through a user's allowance, sent while berth was down is not lost.
   */
  recentChats?: (channelId: string, since: number, limit: number) => Promise<string[]>;
}

/** How one Gateway connection ended: resume the session on the next, or start a new one. */
type ConnectionEnd = 'resume' | 'identify';

export class DiscordClient implements PlatformClient {
  readonly platform = 'discord' as const;
  readonly maxTextLength = DISCORD_MAX_TEXT;
  readonly maxFileBytes = DISCORD_MAX_FILE_BYTES;
  private sessionId: string | null = null;
  private resumeUrl: string | null = null;
  /** The sequence of the last dispatch handled (committed): a RESUME replays what follows. */
  private seq: number | null = null;
  private botUserId: string | null = null;
  /** Per route, until when X-RateLimit-Remaining: 0 says to wait. */
  private readonly resetAt = new Map<string, number>();

  constructor(
    private readonly channel: Channel,
    private readonly options: DiscordOptions,
  ) {}

  /**
   * Keeps the Gateway open until `signal`, handing each message (and, after a fresh
   * session, the history it missed) to `commit`. Resolves when aborted; rejects with a
   * PlatformError when a connection failed (the runner backs off and calls it again, and
   * the session is resumed where it can be).
   */
  async listen(commit: (event: ChannelEvent) => Promise<void>, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const resuming = this.sessionId !== null && this.resumeUrl !== null;
      const url = resuming ? this.resumeUrl! : await this.gatewayUrl(signal);
      const end = await this.connect(url, commit, signal);
      if (end === 'identify') {
        this.sessionId = null;
        this.seq = null;
      }
    }
  }

  async send(message: ChannelSend, signal: AbortSignal): Promise<string> {
    const body = { ...this.createBody(message), content: message.text };
    const sent = (await this.rest('POST', `/channels/${message.chatId}/messages`, body, signal)) as {
      id: string;
    };
    return sent.id;
  }

  /** A file from Discord's CDN: `GET url` as the attachment names it (signed; no token). */
  download(attachment: ChannelAttachment, signal: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    return fetchPlatformFile(attachment.url ?? '', { signal }, 'Discord attachment');
  }

  /** The create of a text, multipart: `payload_json` (the same nonce and reference) and `files[0]`. */
  async sendFile(message: ChannelSend, file: ChannelFile, signal: AbortSignal): Promise<string> {
    const form = new FormData();
    form.append(
      'payload_json',
      JSON.stringify({ ...this.createBody(message), attachments: [{ id: 0, filename: file.name }] }),
    );
    form.append('files[0]', new Blob([await fileBytes(file)]), file.name);
    const sent = (await this.rest('POST', `/channels/${message.chatId}/messages`, form, signal)) as {
      id: string;
    };
    return sent.id;
  }

  /** What every message create carries: the nonce it is found again by, the reference, no pings. */
  private createBody(message: ChannelSend): Record<string, unknown> {
    const body: Record<string, unknown> = {
      nonce: discordNonce(this.channel.id, message.key),
      enforce_nonce: true,
      // An agent's text pings nobody (no @everyone, no roles, no users).
      allowed_mentions: { parse: [], replied_user: true },
    };
    // A reply whose message was deleted meanwhile is still sent, just not as a reply.
    if (message.replyTo !== null)
      body.message_reference = { message_id: message.replyTo, fail_if_not_exists: false };
    return body;
  }

  async showTyping(chatId: string, signal: AbortSignal): Promise<void> {
    await this.rest('POST', `/channels/${chatId}/typing`, undefined, signal);
  }

  private async gatewayUrl(signal: AbortSignal): Promise<string> {
    const answer = (await this.rest('GET', '/gateway/bot', undefined, signal)) as { url?: string };
    if (typeof answer.url !== 'string')
      throw new PlatformError({ kind: 'transient', description: 'Discord /gateway/bot: no url' });
    return answer.url;
  }

  /** One Gateway connection, from HELLO to its close. */
  private connect(
    baseUrl: string,
    commit: (event: ChannelEvent) => Promise<void>,
    signal: AbortSignal,
  ): Promise<ConnectionEnd> {
    return new Promise<ConnectionEnd>((resolve, reject) => {
      const url = new URL(baseUrl);
      url.searchParams.set('v', '10');
      url.searchParams.set('encoding', 'json');
      const ws = new WebSocket(url);
      let heartbeat: NodeJS.Timeout | undefined;
      let acked = true;
      let settled = false;
      // Frames are handled one after another: a dispatch's sequence moves only once committed.
      let queue = Promise.resolve();
      const finish = (outcome: ConnectionEnd | PlatformError) => {
        if (settled) return;
        settled = true;
        clearInterval(heartbeat);
        signal.removeEventListener('abort', onAbort);
        if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING)
          ws.close(outcome === 'identify' ? 1000 : 4000);
        if (outcome instanceof PlatformError) reject(outcome);
        else resolve(outcome);
      };
      const onAbort = () => finish('resume');
      signal.addEventListener('abort', onAbort, { once: true });
      const sendFrame = (op: number, d: unknown) => ws.send(JSON.stringify({ op, d }));
      const handle = async (frame: GatewayFrame) => {
        switch (frame.op) {
          case 10: {
            const interval = Number((frame.d as { heartbeat_interval?: number })?.heartbeat_interval);
            if (!(interval > 0)) throw new Error('HELLO without a heartbeat_interval');
            heartbeat = setInterval(() => {
              // No ack since the last beat: the connection is a zombie; resume on a new one.
              if (!acked)
                return finish(
                  new PlatformError({
                    kind: 'transient',
                    description: 'Discord Gateway: heartbeat not acknowledged',
                  }),
                );
              acked = false;
              sendFrame(1, this.seq);
            }, interval);
            if (this.sessionId !== null)
              sendFrame(6, { token: this.options.token, session_id: this.sessionId, seq: this.seq });
            else
              sendFrame(2, {
                token: this.options.token,
                intents: DISCORD_INTENTS,
                properties: { os: process.platform, browser: 'berth', device: 'berth' },
              });
            return;
          }
          case 11:
            acked = true;
            return;
          case 1:
            sendFrame(1, this.seq);
            return;
          case 7:
            return finish('resume');
          case 9:
            return finish(frame.d === true ? 'resume' : 'identify');
          case 0:
            await this.dispatch(frame, commit, signal);
            if (frame.s !== null) this.seq = frame.s;
            return;
        }
      };
      ws.addEventListener('message', (event) => {
        const frame = parseGatewayFrame(event.data);
        if (frame === null)
          return finish(
            new PlatformError({
              kind: 'transient',
              description: 'Discord Gateway: malformed frame; reconnecting',
            }),
          );
        queue = queue
          .then(() => (settled ? undefined : handle(frame)))
          .catch((err: unknown) => finish(asPlatformError(err, 'Discord Gateway')));
      });
      ws.addEventListener('close', (event) => {
        if (FATAL_CLOSE.has(event.code))
          return finish(
            new PlatformError({
              kind: 'refused',
              status: event.code,
              description: `Discord Gateway closed: ${event.code} ${event.reason}`,
            }),
          );
        // Let the frames already read be committed before the next connection resumes after them.
        void queue.then(() => finish(NO_RESUME_CLOSE.has(event.code) ? 'identify' : 'resume'));
      });
      ws.addEventListener('error', () => {
        if (ws.readyState !== WebSocket.OPEN)
          finish(new PlatformError({ kind: 'transient', description: 'Discord Gateway: connection failed' }));
      });
    });
  }

  private async dispatch(
    frame: GatewayFrame,
    commit: (event: ChannelEvent) => Promise<void>,
    signal: AbortSignal,
  ): Promise<void> {
    if (frame.t === 'READY') {
      const d = frame.d as { session_id?: string; resume_gateway_url?: string; user?: { id?: string } };
      this.sessionId = d.session_id ?? null;
      this.resumeUrl = d.resume_gateway_url ?? null;
      this.botUserId = d.user?.id ?? this.botUserId;
      // A new session replays nothing: read back what came while none was open.
      await this.readBack(commit, signal);
    } else if (frame.t === 'MESSAGE_CREATE') {
      const id = (frame.d as { id?: unknown })?.id;
      if (typeof id !== 'string') return;
      await commit({ eventId: id, inbound: toDiscordInbound(this.channel, this.botUserId, frame.d) });
    }
  }

  /** The messages since the floor of every allowlisted chat and every recently active one, oldest first per chat, committed by id. */
  private async readBack(commit: (event: ChannelEvent) => Promise<void>, signal: AbortSignal): Promise<void> {
    const floor = Math.max(
      this.channel.createdAt,
      this.options.clock.now() - CHANNEL_EVENT_KEEP_MS + HISTORY_MARGIN_MS,
    );
    const recent = (await this.options.recentChats?.(this.channel.id, floor, READ_BACK_RECENT_CHATS)) ?? [];
    for (const chatId of new Set([...this.channel.allowChats, ...recent])) {
      let after = snowflakeAt(floor);
      for (;;) {
        const page = (await this.restPatiently(
          'GET',
          `/channels/${chatId}/messages?after=${after}&limit=100`,
          signal,
        )) as DiscordMessage[];
        if (!Array.isArray(page) || page.length === 0) break;
        for (const m of [...page].sort(bySnowflake))
          await commit({ eventId: m.id, inbound: toDiscordInbound(this.channel, this.botUserId, m) });
        after = page.reduce((max, m) => (bySnowflake(m, max) > 0 ? m : max)).id;
        if (page.length < 100) break;
      }
    }
  }

  /** A read, retried after each 429 for as long as Discord asks (a read can be repeated). */
  private async restPatiently(method: string, path: string, signal: AbortSignal): Promise<unknown> {
    for (;;) {
      try {
        return await this.rest(method, path, undefined, signal);
      } catch (err) {
        if (!(err instanceof PlatformError) || err.failure.kind !== 'rate-limited') throw err;
        await sleep(err.failure.retryAfterMs, signal);
      }
    }
  }

  private async rest(
    method: string,
    path: string,
    body: Record<string, unknown> | FormData | undefined,
    signal: AbortSignal,
  ): Promise<unknown> {
    const route = `${method} ${path.split('?')[0]}`;
    const name = `Discord ${method} ${path.split('?')[0]}`;
    // The bucket said it is empty: wait for its reset instead of earning a 429.
    const waitMs = (this.resetAt.get(route) ?? 0) - this.options.clock.now();
    if (waitMs > 0) await sleep(waitMs, signal);
    let res: Response;
    try {
      res = await fetch(`${this.options.apiUrl.replace(/\/$/, '')}${path}`, {
        method,
        headers: {
          authorization: `Bot ${this.options.token}`,
          // A form sets its own multipart content type.
          ...(body && !(body instanceof FormData) ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: body instanceof FormData ? body : JSON.stringify(body) } : {}),
        signal: AbortSignal.any([signal, AbortSignal.timeout(ANSWER_TIMEOUT_MS)]),
      });
    } catch (err) {
      throw new PlatformError({ kind: 'transient', description: `${name}: no answer` }, { cause: err });
    }
    const remaining = res.headers.get('x-ratelimit-remaining');
    const resetAfter = Number(res.headers.get('x-ratelimit-reset-after'));
    if (remaining === '0' && Number.isFinite(resetAfter))
      this.resetAt.set(route, this.options.clock.now() + resetAfter * 1000);
    const text = await res.text().catch(() => '');
    let answer: unknown = null;
    try {
      answer = text === '' ? null : JSON.parse(text);
    } catch {
      if (res.ok || res.status === 429)
        throw new PlatformError({
          kind: 'transient',
          description: `${name}: answered ${res.status} without JSON`,
        });
    }
    if (res.status === 429) {
      const seconds = Number(
        (answer as { retry_after?: unknown } | null)?.retry_after ?? res.headers.get('retry-after'),
      );
      throw new PlatformError({
        kind: 'rate-limited',
        retryAfterMs: Math.max(1, Math.ceil((Number.isFinite(seconds) ? seconds : 1) * 1000)),
      });
    }
    if (res.ok) return answer;
    const description = `${name}: ${(answer as { message?: string } | null)?.message ?? `error ${res.status}`}`;
    if (res.status >= 500) throw new PlatformError({ kind: 'transient', description });
    throw new PlatformError({ kind: 'refused', status: res.status, description });
  }
}

export function discordClientFactory(options: Omit<DiscordOptions, 'token'>) {
  return (channel: Channel, { token }: ChannelSecrets): PlatformClient =>
    new DiscordClient(channel, { ...options, token });
}
