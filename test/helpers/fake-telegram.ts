/**
 * A local Telegram Bot API server speaking the real wire protocol, for tests driven by the
 * real client: `POST /bot<token>/<method>` with a JSON body, answered `{ok: true, result}`
 * or `{ok: false, error_code, description, parameters?: {retry_after}}`.
 *
 * - getUpdates(offset, timeout, limit): forgets every update below `offset` (as Telegram
 *   does: that is the acknowledgement), returns the rest in order, and long-polls up to
 *   `timeout` seconds when there are none.
 * - sendMessage, sendChatAction: recorded and answered like Telegram (message ids count up
 *   per chat). With `parse_mode: 'MarkdownV2'` the text is read as Telegram reads it
 *   (helpers/markdown-v2.ts): markup it cannot read is answered 400 "can't parse entities",
 *   and what is recorded is the text a user sees; a test can make the next N MarkdownV2
 *   sends refuse their markup anyway.
 * - sendDocument (multipart/form-data): recorded with the file's name and bytes.
 * - Two getUpdates at once: the earlier one is answered 409 Conflict ("terminated by other
 *   getUpdates request"), as Telegram does when two bot instances poll.
 * - setWebhook(url, secret_token) / deleteWebhook: while a webhook is set, getUpdates
 *   answers 409 (as Telegram does) and each update is POSTed to the URL instead, in order,
 *   with `X-Telegram-Bot-Api-Secret-Token`, until answered 2xx (retried after a failure).
 * - getMe: the bot (id = the token's first part, a username).
 * - Files: a user's message may carry a document or a photo (in two sizes, as Telegram
 *   sends them); getFile answers its file_path (400 "file is too big" past 20 MB, as the
 *   Bot API does) and `GET /file/bot<token>/<file_path>` serves its bytes.
 * Every call is recorded (method, body, status, time) so a test can count; a test can
 * make the next N calls of a method answer 429 with a retry_after.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeLocal, listenLocal } from './local-server.js';
import { readMarkdownV2 } from './markdown-v2.js';

export interface FakeTelegramCall {
  method: string;
  body: Record<string, unknown>;
  status: number;
  /** When the request arrived (performance.now()). */
  at: number;
  /** When it was answered; a long poll its client gave up on is answered to nobody. */
  answeredAt: number;
  abandoned: boolean;
}

export interface FakeUpdate {
  update_id: number;
  message: {
    message_id: number;
    date: number;
    chat: { id: number; type: string };
    from: { id: number; is_bot: false; first_name: string; username?: string };
    text?: string;
    caption?: string;
    document?: FakeFileRef & { file_name?: string };
    photo?: (FakeFileRef & { width: number; height: number })[];
    /** Mentions and commands, as Telegram marks them (offsets in UTF-16 units). */
    entities?: { type: string; offset: number; length: number }[];
    reply_to_message?: {
      message_id: number;
      date: number;
      chat: { id: number; type: string };
      from: { id: number; is_bot: true; first_name: string; username: string };
    };
  };
}

interface FakeFileRef {
  file_id: string;
  file_unique_id: string;
  file_size?: number;
}

/** A file a user sends: its bytes, and the size Telegram reports (its real size unless told). */
export interface FakeFileInput {
  bytes: Buffer;
  /** null: the size is left out, as Telegram may. */
  reportedSize?: number | null;
}

/** The Bot API's download limit. */
const MAX_FILE_BYTES = 20 * 1000 * 1000;

export interface SentMessage {
  chatId: string;
  messageId: number;
  /** As the user sees it (MarkdownV2 read). */
  text: string;
  /** The text as sent, markup and all. */
  raw: string;
  parseMode: string | null;
  replyTo: number | null;
  at: number;
  /** A sendDocument's file. */
  document?: { name: string; bytes: Buffer };
}

export class FakeTelegram {
  readonly calls: FakeTelegramCall[] = [];
  readonly sent: SentMessage[] = [];
  /** Updates Telegram still keeps (not yet acknowledged by a later offset). */
  private updates: FakeUpdate[] = [];
  private nextUpdateId = 1000;
  private readonly nextMessageId = new Map<string, number>();
  private readonly failures = new Map<string, { count: number; retryAfter: number }>();
  private entityRefusals = 0;
  private readonly files = new Map<string, { bytes: Buffer; path: string; reportedSize: number }>();
  private waiters: (() => void)[] = [];
  /** The getUpdates waiting now, if any: a second one ends it with 409. */
  private polling: { res: ServerResponse; end: () => void } | null = null;
  /** Each update's arrival time, by update_id (tests measure latency from it). */
  readonly arrivedAt = new Map<number, number>();
  private server = createServer((req, res) => void this.handle(req, res));
  url = '';
  /** The webhook set (setWebhook), if any. */
  webhook: { url: string; secretToken: string } | null = null;
  /** Every webhook POST: the update, and the status berth answered (0: no answer). */
  readonly webhookDeliveries: { updateId: number; status: number }[] = [];
  private pumping = false;
  private closed = false;

  constructor(
    readonly token: string,
    /** The bot's username, as getMe answers it. */
    readonly botUsername = 'berth_test_bot',
  ) {}

  /** The bot's user id: the token's first part, as Telegram's tokens are made. */
  get botId(): number {
    return Number(this.token.split(':')[0]);
  }

  async start(): Promise<this> {
    this.url = await listenLocal(this.server);
    return this;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w();
    closeLocal(this.server);
  }

  /** A user writes to the bot; returns the update's and the message's ids. */
  userMessage(input: {
    chatId: number;
    userId: number;
    username?: string;
    text?: string;
    chatType?: string;
    /** The id of the bot's message this one replies to. */
    replyToBot?: number;
    caption?: string;
    document?: FakeFileInput & { name?: string };
    photo?: FakeFileInput;
  }) {
    const chat = String(input.chatId);
    const messageId = this.takeMessageId(chat);
    const chatField = { id: input.chatId, type: input.chatType ?? 'private' };
    // Telegram marks every @mention and /command in the text.
    const entities = [
      ...(input.text ?? '').matchAll(/(^|\s)(@[A-Za-z0-9_]{5,32}|\/[a-z_]+(?:@[A-Za-z0-9_]+)?)/g),
    ].map((m) => ({
      type: m[2]!.startsWith('@') ? 'mention' : 'bot_command',
      offset: m.index + m[1]!.length,
      length: m[2]!.length,
    }));
    const update: FakeUpdate = {
      update_id: this.nextUpdateId++,
      message: {
        message_id: messageId,
        date: Math.floor(Date.now() / 1000),
        chat: chatField,
        from: {
          id: input.userId,
          is_bot: false,
          first_name: input.username ?? 'user',
          ...(input.username ? { username: input.username } : {}),
        },
        ...(input.text !== undefined ? { text: input.text } : {}),
        ...(input.caption !== undefined ? { caption: input.caption } : {}),
        ...(input.document
          ? {
              document: {
                ...this.addFile(input.document, 'documents'),
                ...(input.document.name ? { file_name: input.document.name } : {}),
              },
            }
          : {}),
        // Telegram sends a photo in several sizes, smallest first.
        ...(input.photo
          ? {
              photo: [
                {
                  ...this.addFile({ bytes: input.photo.bytes.subarray(0, 1) }, 'photos'),
                  width: 90,
                  height: 90,
                },
                { ...this.addFile(input.photo, 'photos'), width: 800, height: 800 },
              ],
            }
          : {}),
        ...(entities.length ? { entities } : {}),
        ...(input.replyToBot === undefined
          ? {}
          : {
              reply_to_message: {
                message_id: input.replyToBot,
                date: Math.floor(Date.now() / 1000),
                chat: chatField,
                from: { id: this.botId, is_bot: true, first_name: 'berth', username: this.botUsername },
              },
            }),
      },
    };
    this.updates.push(update);
    this.arrivedAt.set(update.update_id, performance.now());
    for (const w of this.waiters.splice(0)) w();
    void this.pumpWebhook();
    return { updateId: update.update_id, messageId, update };
  }

  /** POSTs one update to the webhook as Telegram does, with `secret` (default: the one set); the status berth answered. */
  async postUpdate(update: FakeUpdate, secret = this.webhook?.secretToken): Promise<number> {
    const res = await fetch(this.webhook!.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(secret === undefined ? {} : { 'x-telegram-bot-api-secret-token': secret }),
      },
      body: JSON.stringify(update),
    });
    await res.body?.cancel();
    return res.status;
  }

  /** The updates still kept, delivered one by one to the webhook; one refused or unanswered is tried again. */
  private async pumpWebhook(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.webhook && !this.closed && this.updates.length > 0) {
        const update = this.updates[0]!;
        const status = await this.postUpdate(update).catch(() => 0);
        this.webhookDeliveries.push({ updateId: update.update_id, status });
        if (status >= 200 && status < 300) this.updates.shift();
        else await new Promise((r) => setTimeout(r, 500));
      }
    } finally {
      this.pumping = false;
    }
  }

  /** Every update still kept (not yet acknowledged), in order. */
  get keptUpdates(): readonly FakeUpdate[] {
    return this.updates;
  }

  private addFile(input: FakeFileInput, folder: string): FakeFileRef {
    const n = this.files.size + 1;
    const ref = { file_id: `FILE${n}-${folder}`, file_unique_id: `U${n}` };
    const reportedSize = input.reportedSize === undefined ? input.bytes.length : input.reportedSize;
    this.files.set(ref.file_id, {
      bytes: input.bytes,
      path: `${folder}/file_${n}`,
      reportedSize: reportedSize ?? input.bytes.length,
    });
    return reportedSize === null ? ref : { ...ref, file_size: reportedSize };
  }

  /** The next `count` calls of `method` answer 429 with this retry_after (seconds). */
  rateLimitNext(method: string, count: number, retryAfterSeconds: number): void {
    this.failures.set(method, { count, retryAfter: retryAfterSeconds });
  }

  /** The next `count` MarkdownV2 sends are answered 400 "can't parse entities", valid or not. */
  refuseEntitiesNext(count: number): void {
    this.entityRefusals = count;
  }

  /** Updates not yet acknowledged. */
  get pendingUpdates(): number {
    return this.updates.length;
  }

  callsOf(method: string): FakeTelegramCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** A message the bot sent: recorded, and answered as Telegram's Message (with `fields`). */
  private recordSent(sent: Omit<SentMessage, 'messageId' | 'at'>, fields: Record<string, unknown>) {
    const messageId = this.takeMessageId(sent.chatId);
    this.sent.push({ ...sent, messageId, at: performance.now() });
    const chat = { id: Number(sent.chatId), type: 'private' };
    return {
      ok: true,
      result: { message_id: messageId, date: Math.floor(Date.now() / 1000), chat, ...fields },
    };
  }

  private takeMessageId(chat: string): number {
    const id = this.nextMessageId.get(chat) ?? 1;
    this.nextMessageId.set(chat, id + 1);
    return id;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const arrivedAt = performance.now();
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const match = /^\/bot([^/]+)\/(\w+)$/.exec(req.url ?? '');
    const reply = (
      status: number,
      body: unknown,
      method = match?.[2] ?? '?',
      parsed: Record<string, unknown> = {},
    ) => {
      this.calls.push({
        method,
        body: parsed,
        status,
        at: arrivedAt,
        answeredAt: performance.now(),
        abandoned: res.destroyed,
      });
      if (res.destroyed) return;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const download = /^\/file\/bot([^/]+)\/(.+)$/.exec(req.url ?? '');
    if (req.method === 'GET' && download) {
      const file = [...this.files.values()].find((f) => f.path === download[2]);
      this.calls.push({
        method: 'file',
        body: { path: download[2] },
        status: file ? 200 : 404,
        at: arrivedAt,
        answeredAt: performance.now(),
        abandoned: false,
      });
      if (download[1] !== this.token || !file) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': file.bytes.length });
      res.end(file.bytes);
      return;
    }
    if (req.method !== 'POST' || !match)
      return reply(404, { ok: false, error_code: 404, description: 'Not Found' });
    const [, token, method = ''] = match;
    let body: Record<string, unknown>;
    try {
      body = !chunks.length
        ? {}
        : String(req.headers['content-type']).startsWith('multipart/form-data')
          ? await readForm(Buffer.concat(chunks), String(req.headers['content-type']))
          : (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
    } catch {
      return reply(400, { ok: false, error_code: 400, description: 'Bad Request: invalid JSON' }, method);
    }
    if (token !== this.token)
      return reply(401, { ok: false, error_code: 401, description: 'Unauthorized' }, method, body);
    const failure = this.failures.get(method);
    if (failure && failure.count > 0) {
      failure.count -= 1;
      return reply(
        429,
        {
          ok: false,
          error_code: 429,
          description: `Too Many Requests: retry after ${failure.retryAfter}`,
          parameters: { retry_after: failure.retryAfter },
        },
        method,
        body,
      );
    }
    switch (method) {
      case 'setWebhook': {
        const secretToken = String(body.secret_token ?? '');
        if (!/^[A-Za-z0-9_-]{1,256}$/.test(secretToken))
          return reply(
            400,
            {
              ok: false,
              error_code: 400,
              description: 'Bad Request: secret token contains unallowed characters',
            },
            method,
            body,
          );
        this.webhook = { url: String(body.url), secretToken };
        void this.pumpWebhook();
        return reply(200, { ok: true, result: true, description: 'Webhook was set' }, method, body);
      }
      case 'deleteWebhook':
        this.webhook = null;
        return reply(200, { ok: true, result: true, description: 'Webhook was deleted' }, method, body);
      case 'getUpdates': {
        if (this.webhook)
          return reply(
            409,
            {
              ok: false,
              error_code: 409,
              description:
                "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            },
            method,
            body,
          );
        const offset = Number(body.offset ?? 0);
        const limit = Number(body.limit ?? 100);
        const timeoutS = Number(body.timeout ?? 0);
        // An offset acknowledges every update below it: Telegram forgets them.
        if (offset > 0) this.updates = this.updates.filter((u) => u.update_id >= offset);
        const deadline = Date.now() + timeoutS * 1000;
        if (this.polling && !this.polling.res.destroyed) this.polling.end();
        let conflict = false;
        let wakeMe = () => {};
        const me = {
          res,
          end: () => {
            conflict = true;
            wakeMe();
          },
        };
        this.polling = me;
        res.on('close', () => {
          if (this.polling === me) this.polling = null;
        });
        while (this.updates.length === 0 && Date.now() < deadline && !res.destroyed && !conflict) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, deadline - Date.now());
            wakeMe = () => {
              clearTimeout(timer);
              resolve();
            };
            this.waiters.push(wakeMe);
          });
        }
        if (this.polling === me) this.polling = null;
        if (conflict)
          return reply(
            409,
            {
              ok: false,
              error_code: 409,
              description:
                'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running',
            },
            method,
            body,
          );
        return reply(200, { ok: true, result: this.updates.slice(0, limit) }, method, body);
      }
      case 'sendMessage': {
        const chatId = String(body.chat_id);
        const raw = String(body.text ?? '');
        const parseMode = typeof body.parse_mode === 'string' ? body.parse_mode : null;
        let text = raw;
        if (parseMode === 'MarkdownV2') {
          let refusal: string | null = null;
          try {
            text = readMarkdownV2(raw);
          } catch (err) {
            refusal = (err as Error).message;
          }
          if (refusal === null && this.entityRefusals > 0) {
            this.entityRefusals -= 1;
            refusal = 'refused on demand';
          }
          if (refusal !== null)
            return reply(
              400,
              {
                ok: false,
                error_code: 400,
                description: `Bad Request: can't parse entities: ${refusal}`,
              },
              method,
              body,
            );
        }
        if (text.length === 0 || text.length > 4096)
          return reply(
            400,
            {
              ok: false,
              error_code: 400,
              description: text.length
                ? 'Bad Request: message is too long'
                : 'Bad Request: message text is empty',
            },
            method,
            body,
          );
        const replyParameters = body.reply_parameters as { message_id?: number } | undefined;
        const replyTo =
          replyParameters?.message_id ?? (body.reply_to_message_id as number | undefined) ?? null;
        return reply(200, this.recordSent({ chatId, text, raw, parseMode, replyTo }, { text }), method, body);
      }
      case 'getFile': {
        const id = String(body.file_id);
        const file = this.files.get(id);
        const refuse = (description: string) =>
          reply(
            400,
            { ok: false, error_code: 400, description: `Bad Request: ${description}` },
            method,
            body,
          );
        if (!file) return refuse('invalid file_id');
        if (file.reportedSize > MAX_FILE_BYTES) return refuse('file is too big');
        return reply(
          200,
          {
            ok: true,
            result: {
              file_id: id,
              file_unique_id: `U${id}`,
              file_size: file.reportedSize,
              file_path: file.path,
            },
          },
          method,
          body,
        );
      }
      case 'getMe':
        return reply(
          200,
          {
            ok: true,
            result: { id: this.botId, is_bot: true, first_name: 'berth', username: this.botUsername },
          },
          method,
          body,
        );
      case 'sendDocument': {
        const chatId = String(body.chat_id);
        const document = body.document as { name: string; bytes: Buffer } | undefined;
        if (!document)
          return reply(
            400,
            { ok: false, error_code: 400, description: 'Bad Request: there is no document in the request' },
            method,
            body,
          );
        const replyTo =
          typeof body.reply_parameters === 'string'
            ? ((JSON.parse(body.reply_parameters) as { message_id?: number }).message_id ?? null)
            : null;
        return reply(
          200,
          this.recordSent(
            { chatId, text: '', raw: '', parseMode: null, replyTo, document },
            { document: { file_name: document.name } },
          ),
          method,
          { ...body, document: { name: document.name, size: document.bytes.length } },
        );
      }
      case 'sendChatAction':
        return reply(200, { ok: true, result: true }, method, body);
      default:
        return reply(
          404,
          { ok: false, error_code: 404, description: 'Not Found: method not found' },
          method,
          body,
        );
    }
  }
}

/** A multipart body as Telegram reads it: fields as strings, files as their name and bytes. */
async function readForm(bytes: Buffer, contentType: string): Promise<Record<string, unknown>> {
  const form = await new Response(bytes, { headers: { 'content-type': contentType } }).formData();
  const body: Record<string, unknown> = {};
  for (const [key, value] of form.entries())
    body[key] =
      typeof value === 'string' ? value : { name: value.name, bytes: Buffer.from(await value.arrayBuffer()) };
  return body;
}
