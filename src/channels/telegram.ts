/**
 * Telegram over its Bot API, spoken directly with fetch (no SDK): `POST <api>/bot<token>/
 * <method>` with a JSON body, answered `{ok, result}` or `{ok: false, error_code,
 * description, parameters: {retry_after}}`. Long polling with getUpdates: an update is
 * forgotten by Telegram only when a later getUpdates asks for offset = its update_id + 1,
 * which the runner does only after the update's commit. Or webhook mode: the lease holder
 * sets the webhook (with a secret_token), and Telegram POSTs each update to berth's API
 * (src/api/telegram-updates-routes.ts), which commits it by update_id before answering 200.
 * Replies go out in MarkdownV2,
 * converted from the agent's Markdown with everything else escaped (telegram-markdown.ts);
 * should Telegram still refuse a part's entities (400 "can't parse entities"), that part is
 * sent again at once as plain text: a formatting slip never loses a reply. Files: a
 * message's document or photo is fetched with getFile and `GET <api>/file/bot<token>/<path>`;
 * a file back to the chat goes with sendDocument (multipart).
 *
 * The token appears in request URLs only; it is never logged (errors name the method).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Channel, ChannelAttachment, ChannelInbound, ChannelRespond } from '../core/index.js';
import {
  type ChannelFile,
  type ChannelPart,
  type ChannelSecrets,
  type ChannelSend,
  fetchPlatformFile,
  fileBytes,
  type PlatformClient,
  PlatformError,
} from './channel.js';
import { toTelegramParts } from './telegram-markdown.js';

/** Telegram's limit of one message's text, in UTF-16 units. */
export const TELEGRAM_MAX_TEXT = 4096;
/** The largest file a bot may download from the Bot API (getFile). */
export const TELEGRAM_MAX_FILE_BYTES = 20 * 1000 * 1000;

interface TelegramUser {
  id: number;
  username?: string;
}

interface TelegramFileRef {
  file_id: string;
  file_unique_id: string;
  file_size?: number;
}

interface TelegramMessage {
  message_id: number;
  chat: { id: number; type: string };
  from?: TelegramUser;
  text?: string;
  entities?: { type: string; offset: number; length: number; user?: TelegramUser }[];
  reply_to_message?: { from?: TelegramUser };
  /** A file's or photo's text. */
  caption?: string;
  document?: TelegramFileRef & { file_name?: string };
  /** One photo in several sizes, smallest first. */
  photo?: (TelegramFileRef & { width: number; height: number })[];
}

export interface TelegramUpdate {
  update_id: number;
  message?: TelegramMessage;
}

/** The bot itself (getMe): who a mention or a reply must name. */
export interface TelegramBot {
  id: number;
  username: string;
}

interface TelegramAnswer<T> {
  ok: boolean;
  result?: T;
  error_code?: number;
  description?: string;
  parameters?: { retry_after?: number };
}

/** A request not answered in this time (beyond a long poll's wait) failed. */
const ANSWER_TIMEOUT_MS = 15_000;

export interface TelegramOptions {
  /** e.g. https://api.telegram.org */
  apiUrl: string;
  token: string;
  /** In groups, every message reaches the agent, or only those naming the bot. @default 'all' */
  respondTo?: ChannelRespond;
  /** Webhook mode: where Telegram POSTs updates (berth's route) and the secret_token it sends along; absent = long polling. */
  webhook?: { url: string; secretToken: string };
}

/** The route Telegram POSTs a channel's updates to, under berth's public base URL. */
export function telegramWebhookUrl(baseUrl: string, channelId: string): string {
  return `${baseUrl.replace(/\/$/, '')}/v1/channels/${channelId}/telegram/updates`;
}

/** Whether a webhook request carries the channel's secret_token (`X-Telegram-Bot-Api-Secret-Token`), compared in constant time. */
export function verifyTelegramSecretToken(secretToken: string, header: string | undefined): boolean {
  if (header === undefined) return false;
  // Hashed first: timingSafeEqual needs equal lengths, and the length must not leak either.
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(header), digest(secretToken));
}

export class TelegramClient implements PlatformClient {
  readonly platform = 'telegram' as const;
  readonly maxTextLength = TELEGRAM_MAX_TEXT;
  readonly maxFileBytes = TELEGRAM_MAX_FILE_BYTES;

  private bot: Promise<TelegramBot> | null = null;
  /** Webhook mode only: registers the webhook, then holds while the lease does (updates come to berth's API). */
  readonly listen?: PlatformClient['listen'];

  constructor(private readonly options: TelegramOptions) {
    const webhook = options.webhook;
    if (webhook) this.listen = (_commit, signal) => this.holdWebhook(webhook, signal);
  }

  /**
   * Tells Telegram where to POST updates (setWebhook, with the secret_token it will send
   * along), then waits for `signal`. Telegram keeps the webhook across restarts; setting
   * it again on each lease is harmless and repairs a URL or secret changed meanwhile.
   */
  private async holdWebhook(
    webhook: { url: string; secretToken: string },
    signal: AbortSignal,
  ): Promise<void> {
    await this.call<boolean>(
      'setWebhook',
      { url: webhook.url, secret_token: webhook.secretToken, allowed_updates: ['message'] },
      signal,
    );
    if (signal.aborted) return;
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  }

  /** A pushed update as berth's inbound (asking the bot's name first when only mentions are answered). */
  async inboundOf(update: TelegramUpdate, signal: AbortSignal): Promise<ChannelInbound> {
    const respondTo = this.options.respondTo ?? 'all';
    return toTelegramInbound(update, respondTo, respondTo === 'mention' ? await this.me(signal) : null);
  }

  async receive(cursor: number, waitMs: number, signal: AbortSignal): Promise<ChannelInbound[]> {
    const getUpdates = () =>
      this.call<TelegramUpdate[]>(
        'getUpdates',
        { offset: cursor, timeout: Math.floor(waitMs / 1000), allowed_updates: ['message'] },
        signal,
        waitMs,
      );
    let updates: TelegramUpdate[];
    try {
      updates = await getUpdates();
    } catch (err) {
      if (!isWebhookConflict(err)) throw err;
      // The bot went back to polling: Telegram keeps a webhook set earlier (by an earlier
      // webhook channel) and refuses getUpdates while it is. The updates it holds stay.
      await this.call<boolean>('deleteWebhook', { drop_pending_updates: false }, signal);
      updates = await getUpdates();
    }
    return Promise.all(updates.map((u) => this.inboundOf(u, signal)));
  }

  /** The bot's own id and username, asked once: a mention names them. */
  private me(signal: AbortSignal): Promise<TelegramBot> {
    // One question however many updates ask at once; asked again only after a failure.
    this.bot ??= this.call<TelegramUser>('getMe', {}, signal).then(
      (me) => ({ id: me.id, username: me.username ?? '' }),
      (err: unknown) => {
        this.bot = null;
        throw err;
      },
    );
    return this.bot;
  }

  parts(text: string): ChannelPart[] {
    return toTelegramParts(text, TELEGRAM_MAX_TEXT).map((p) => ({ text: p.plain, formatted: p.markdown }));
  }

  async send(message: ChannelSend, signal: AbortSignal): Promise<string> {
    const body: Record<string, unknown> = { chat_id: message.chatId, text: message.text };
    // A reply whose message was deleted meanwhile is still sent, just not as a reply.
    if (message.replyTo !== null)
      body.reply_parameters = { message_id: Number(message.replyTo), allow_sending_without_reply: true };
    if (message.formatted !== undefined) {
      try {
        const sent = await this.call<TelegramMessage>(
          'sendMessage',
          { ...body, text: message.formatted, parse_mode: 'MarkdownV2' },
          signal,
        );
        return String(sent.message_id);
      } catch (err) {
        if (!isEntityRefusal(err)) throw err;
      }
    }
    const sent = await this.call<TelegramMessage>('sendMessage', body, signal);
    return String(sent.message_id);
  }

  /** getFile for the file's path, then `GET <api>/file/bot<token>/<path>`. */
  async download(attachment: ChannelAttachment, signal: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const file = await this.call<{ file_path?: string }>('getFile', { file_id: attachment.id }, signal);
    if (!file.file_path)
      throw new PlatformError({
        kind: 'refused',
        status: 400,
        description: 'Telegram getFile: no file_path',
      });
    const url = `${this.apiBase()}/file/bot${this.options.token}/${file.file_path}`;
    return fetchPlatformFile(url, { signal }, 'Telegram file');
  }

  /** sendDocument, multipart: the file's bytes as `document`, in reply like a text. */
  async sendFile(message: ChannelSend, file: ChannelFile, signal: AbortSignal): Promise<string> {
    const form = new FormData();
    form.append('chat_id', message.chatId);
    if (message.replyTo !== null)
      form.append(
        'reply_parameters',
        JSON.stringify({ message_id: Number(message.replyTo), allow_sending_without_reply: true }),
      );
    form.append('document', new Blob([await fileBytes(file)]), file.name);
    const sent = await this.call<TelegramMessage>('sendDocument', form, signal);
    return String(sent.message_id);
  }

  async showTyping(chatId: string, signal: AbortSignal): Promise<void> {
    await this.call<boolean>('sendChatAction', { chat_id: chatId, action: 'typing' }, signal);
  }

  private apiBase(): string {
    return this.options.apiUrl.replace(/\/$/, '');
  }

  /** @param waitMs how long the platform may hold the request (a long poll), beyond the usual answer time. */
  private async call<T>(
    method: string,
    body: Record<string, unknown> | FormData,
    signal: AbortSignal,
    waitMs = 0,
  ): Promise<T> {
    const url = `${this.apiBase()}/bot${this.options.token}/${method}`;
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        // A form sets its own multipart content type.
        ...(body instanceof FormData
          ? { body }
          : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
        signal: AbortSignal.any([signal, AbortSignal.timeout(waitMs + ANSWER_TIMEOUT_MS)]),
      });
    } catch (err) {
      // The URL holds the token: say the method, never the URL.
      throw new PlatformError(
        { kind: 'transient', description: `Telegram ${method}: no answer` },
        { cause: err },
      );
    }
    let answer: TelegramAnswer<T>;
    try {
      answer = (await res.json()) as TelegramAnswer<T>;
    } catch (err) {
      throw new PlatformError(
        { kind: 'transient', description: `Telegram ${method}: answered ${res.status} without JSON` },
        { cause: err },
      );
    }
    if (answer.ok && answer.result !== undefined) return answer.result;
    const status = answer.error_code ?? res.status;
    const description = `Telegram ${method}: ${answer.description ?? `error ${status}`}`;
    if (status === 429)
      throw new PlatformError({
        kind: 'rate-limited',
        retryAfterMs: Math.max(1, answer.parameters?.retry_after ?? 1) * 1000,
      });
    // 409: another getUpdates (or a webhook) holds the bot; 5xx: Telegram's trouble. Both pass.
    if (status === 409 || status >= 500) throw new PlatformError({ kind: 'transient', description });
    throw new PlatformError({ kind: 'refused', status, description });
  }
}

/** Telegram's 409 to getUpdates while a webhook is set ("can't use getUpdates method while webhook is active"). */
function isWebhookConflict(err: unknown): boolean {
  return err instanceof PlatformError && /webhook is active/i.test(err.message);
}

/** Telegram's 400 for markup it cannot read: nothing was sent, and the plain text will go. */
function isEntityRefusal(err: unknown): boolean {
  return (
    err instanceof PlatformError &&
    err.failure.kind === 'refused' &&
    err.failure.status === 400 &&
    /can't parse entities/i.test(err.failure.description)
  );
}

/**
 * An update as berth's inbound. With `respondTo: 'mention'`, a group message reaches the
 * agent only when it names the bot (an `@botname` mention or a `/command@botname`) or
 * replies to one of its messages; it comes back with text '' otherwise (it moves the
 * cursor only). Private chats always reach it. The bot's `@name` is cut from the text.
 */
export function toTelegramInbound(
  update: TelegramUpdate,
  respondTo: ChannelRespond,
  bot: TelegramBot | null,
): ChannelInbound {
  const m = update.message;
  const text = m?.text ?? m?.caption ?? '';
  const named = bot === null ? null : new RegExp(`@${bot.username}\\b`, 'gi');
  const heard =
    respondTo === 'all' ||
    m?.chat.type === 'private' ||
    (m !== undefined && bot !== null && mentions(m, bot));
  return {
    updateId: update.update_id,
    chatId: m ? String(m.chat.id) : '',
    chatType: m?.chat.type ?? '',
    userId: m?.from ? String(m.from.id) : '',
    username: m?.from?.username ?? null,
    messageId: m ? String(m.message_id) : '',
    threadId: null,
    text: !heard ? '' : named === null ? text : text.replace(named, '').trim(),
    ...(heard && m && (m.document || m.photo) ? { attachments: attachmentsOf(m) } : {}),
  };
}

/** Whether a message names the bot: a mention of it, a command addressed to it, or a reply to it. */
function mentions(m: TelegramMessage, bot: TelegramBot): boolean {
  if (m.reply_to_message?.from?.id === bot.id) return true;
  const text = m.text ?? '';
  const name = `@${bot.username}`.toLowerCase();
  return (m.entities ?? []).some((e) => {
    const piece = text.slice(e.offset, e.offset + e.length).toLowerCase();
    if (e.type === 'mention') return piece === name;
    if (e.type === 'bot_command') return piece.endsWith(name);
    return e.type === 'text_mention' && e.user?.id === bot.id;
  });
}

/** A document by its name; a photo (no name) in its largest size, named by its unique id. */
function attachmentsOf(m: TelegramMessage): ChannelAttachment[] {
  const files: ChannelAttachment[] = [];
  if (m.document)
    files.push({
      id: m.document.file_id,
      name: m.document.file_name ?? `document-${m.document.file_unique_id}`,
      sizeBytes: m.document.file_size ?? null,
    });
  const photo = m.photo?.at(-1);
  if (photo)
    files.push({
      id: photo.file_id,
      name: `photo-${photo.file_unique_id}.jpg`,
      sizeBytes: photo.file_size ?? null,
    });
  return files;
}

export function telegramClientFactory(options: Omit<TelegramOptions, 'token'>) {
  return (channel: Channel, { token, signingSecret }: ChannelSecrets): PlatformClient =>
    new TelegramClient({
      ...options,
      token,
      respondTo: channel.respondTo,
      ...(channel.webhookUrl !== null && signingSecret !== null
        ? { webhook: { url: telegramWebhookUrl(channel.webhookUrl, channel.id), secretToken: signingSecret } }
        : {}),
    });
}
