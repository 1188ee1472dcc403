/**
 * Slack: events pushed to berth's API (the Events API, each request signed with the app's
 * signing secret) or, in Socket Mode, read off a WebSocket the lease holder opens
 * (slack-socket.ts), replies sent with the Web API over fetch (`<api>/<method>`, the bot
 * token as a Bearer header, answered `{ok, …}` or `{ok: false, error}`; a 429 names its
 * wait in Retry-After). No SDK: @slack/web-api retries and queues on its own, and the
 * runner must see each 429 to pace the channel and each failure to record it.
 *
 * A reply goes into the thread of the message it answers (`thread_ts`), in mrkdwn
 * (slack-mrkdwn.ts converts the agent's Markdown and cuts it between whole entities), and
 * carries berth's key of the send in its message metadata; `conversations.replies` reads
 * the thread back, so a send whose record a crash prevented is found, not sent again.
 *
 * The token is sent in a header only; it is never logged (errors name the method).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Channel, ChannelAttachment, ChannelInbound, ChannelRespond } from '../core/index.js';
import {
  type ChannelEvent,
  type ChannelFile,
  type ChannelPart,
  type ChannelSecrets,
  type ChannelSend,
  fetchPlatformFile,
  fileBytes,
  type PlatformClient,
  PlatformError,
} from './channel.js';
import { escapeMrkdwn, toSlackParts } from './slack-mrkdwn.js';
import { socketModeConnection } from './slack-socket.js';

/** The text of one message: Slack truncates past 40,000 characters and asks for at most 4,000. */
export const SLACK_MAX_TEXT = 4000;
/** A signed request older (or newer) than this is refused: a replay. */
export const SLACK_SIGNATURE_MAX_AGE_MS = 5 * 60_000;
/** The metadata event type of berth's sends (Slack: `metadata.event_type`). */
export const SLACK_SEND_EVENT_TYPE = 'berth_channel_send';

const ANSWER_TIMEOUT_MS = 15_000;
/** The error codes that say "try again", not "never". */
const SLACK_TRANSIENT = new Set(['internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

export interface SlackOptions {
  /** e.g. https://slack.com/api */
  apiUrl: string;
  token: string;
  /** Socket Mode: the app-level token (`xapp-…`) that opens the connection; null = events over HTTP. */
  appToken?: string | null;
  /** Which messages reach the agent (parseSlackPush). @default 'all' */
  respondTo?: ChannelRespond;
}

interface SlackAnswer {
  ok: boolean;
  error?: string;
  ts?: string;
  url?: string;
  upload_url?: string;
  file_id?: string;
  messages?: { ts: string; metadata?: { event_type?: string; event_payload?: { key?: string } } }[];
  has_more?: boolean;
  response_metadata?: { next_cursor?: string };
}

export class SlackClient implements PlatformClient {
  readonly platform = 'slack' as const;
  readonly maxTextLength = SLACK_MAX_TEXT;

  /** Socket Mode only: events over a WebSocket berth opens (else they are POSTed to berth's API). */
  readonly listen?: PlatformClient['listen'];

  constructor(private readonly options: SlackOptions) {
    const appToken = options.appToken ?? null;
    if (appToken !== null) this.listen = (commit, signal) => this.listenSocketMode(appToken, commit, signal);
  }

  /** Socket Mode connections one after another until `signal`: each asked for, then kept until Slack ends it. */
  private async listenSocketMode(
    appToken: string,
    commit: (event: ChannelEvent) => Promise<void>,
    signal: AbortSignal,
  ): Promise<void> {
    const channel = { respondTo: this.options.respondTo ?? 'all' };
    while (!signal.aborted) {
      const answer = await this.call('apps.connections.open', { json: {} }, signal, appToken);
      if (typeof answer.url !== 'string')
        throw new PlatformError({ kind: 'transient', description: 'Slack apps.connections.open: no url' });
      await socketModeConnection(
        answer.url,
        async (payload) => {
          const push = parseSlackPush(channel, payload);
          // Not an event (a malformed payload): acknowledged, as nothing berth takes.
          if (push.kind === 'event') await commit({ eventId: push.eventId, inbound: push.inbound });
        },
        signal,
      );
    }
  }

  parts(text: string): ChannelPart[] {
    return toSlackParts(text, SLACK_MAX_TEXT);
  }

  async send(message: ChannelSend, signal: AbortSignal): Promise<string> {
    const body: Record<string, unknown> = {
      channel: message.chatId,
      // A part without markup (a text naming a file) is still read as mrkdwn: escaped.
      text: message.formatted ?? escapeMrkdwn(message.text),
      metadata: { event_type: SLACK_SEND_EVENT_TYPE, event_payload: { key: message.key } },
    };
    if (message.replyTo !== null) body.thread_ts = message.replyTo;
    const answer = await this.call('chat.postMessage', { json: body }, signal);
    return String(answer.ts);
  }

  async findSent(message: ChannelSend, signal: AbortSignal): Promise<string | null> {
    // Only a threaded send can be read back by its thread; an unthreaded one is resent.
    if (message.replyTo === null) return null;
    let cursor = '';
    do {
      const query = new URLSearchParams({
        channel: message.chatId,
        ts: message.replyTo,
        include_all_metadata: 'true',
        limit: '200',
      });
      if (cursor) query.set('cursor', cursor);
      const answer = await this.call('conversations.replies', { query }, signal);
      const found = answer.messages?.find(
        (m) =>
          m.metadata?.event_type === SLACK_SEND_EVENT_TYPE && m.metadata.event_payload?.key === message.key,
      );
      if (found) return found.ts;
      cursor = answer.has_more ? (answer.response_metadata?.next_cursor ?? '') : '';
    } while (cursor);
    return null;
  }

  /**
   * `GET url_private_download` with the bot token, as Slack requires. The token goes only to
   * an https URL or to the API's own origin (a local Slack in tests), never in clear elsewhere.
   */
  async download(attachment: ChannelAttachment, signal: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const url = attachment.url ?? '';
    if (!url.startsWith('https://') && !url.startsWith(`${new URL(this.options.apiUrl).origin}/`))
      throw new PlatformError({
        kind: 'refused',
        status: 400,
        description: 'Slack file: no https download URL',
      });
    return fetchPlatformFile(
      url,
      { headers: { authorization: `Bearer ${this.options.token}` }, signal },
      'Slack file',
    );
  }

  /**
   * Slack's upload flow: files.getUploadURLExternal for an upload URL and the file's id, the
   * bytes POSTed there, then files.completeUploadExternal shares it in the thread. The file's
   * id is the platform id. An upload carries no metadata, so findSent cannot find it: a send
   * cut short by a crash is uploaded again (at-least-once, as on Telegram).
   */
  async sendFile(message: ChannelSend, file: ChannelFile, signal: AbortSignal): Promise<string> {
    const bytes = await fileBytes(file);
    const query = new URLSearchParams({ filename: file.name, length: String(bytes.length) });
    const target = await this.call('files.getUploadURLExternal', { query }, signal);
    if (typeof target.upload_url !== 'string' || typeof target.file_id !== 'string')
      throw new PlatformError({
        kind: 'transient',
        description: 'Slack files.getUploadURLExternal: no upload_url',
      });
    // The upload URL is signed by Slack: no token goes with the bytes.
    const answer = await fetchPlatformFile(
      target.upload_url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream' },
        body: bytes,
        signal: AbortSignal.any([signal, AbortSignal.timeout(ANSWER_TIMEOUT_MS * 4)]),
      },
      'Slack file upload',
    );
    await answer.cancel();
    const complete: Record<string, unknown> = {
      files: [{ id: target.file_id, title: file.name }],
      channel_id: message.chatId,
    };
    if (message.replyTo !== null) complete.thread_ts = message.replyTo;
    await this.call('files.completeUploadExternal', { json: complete }, signal);
    return target.file_id;
  }

  /** Slack has no typing indicator for an Events API bot; the reply is the sign of life. */
  async showTyping(): Promise<void> {}

  private async call(
    method: string,
    request: { json: Record<string, unknown> } | { query: URLSearchParams },
    signal: AbortSignal,
    token = this.options.token,
  ): Promise<SlackAnswer> {
    const base = `${this.options.apiUrl.replace(/\/$/, '')}/${method}`;
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    let res: Response;
    try {
      res = await fetch('json' in request ? base : `${base}?${request.query}`, {
        method: 'json' in request ? 'POST' : 'GET',
        headers:
          'json' in request ? { ...headers, 'content-type': 'application/json; charset=utf-8' } : headers,
        ...('json' in request ? { body: JSON.stringify(request.json) } : {}),
        signal: AbortSignal.any([signal, AbortSignal.timeout(ANSWER_TIMEOUT_MS)]),
      });
    } catch (err) {
      throw new PlatformError(
        { kind: 'transient', description: `Slack ${method}: no answer` },
        { cause: err },
      );
    }
    if (res.status === 429) {
      await res.body?.cancel();
      const seconds = Number(res.headers.get('retry-after'));
      throw new PlatformError({
        kind: 'rate-limited',
        retryAfterMs: Math.max(1, Number.isFinite(seconds) ? seconds : 1) * 1000,
      });
    }
    let answer: SlackAnswer;
    try {
      answer = (await res.json()) as SlackAnswer;
    } catch (err) {
      throw new PlatformError(
        { kind: 'transient', description: `Slack ${method}: answered ${res.status} without JSON` },
        { cause: err },
      );
    }
    if (answer.ok) return answer;
    const description = `Slack ${method}: ${answer.error ?? `error ${res.status}`}`;
    if (res.status >= 500 || SLACK_TRANSIENT.has(answer.error ?? ''))
      throw new PlatformError({ kind: 'transient', description });
    throw new PlatformError({ kind: 'refused', status: res.status, description });
  }
}

/**
 * Whether a request carries Slack's signature: `X-Slack-Signature` = `v0=` + the hex
 * HMAC-SHA256, keyed by the signing secret, of `v0:<X-Slack-Request-Timestamp>:<raw body>`,
 * with a timestamp within 5 minutes of `now` (an older one is a replay).
 */
export function verifySlackSignature(
  signingSecret: string,
  timestamp: string | undefined,
  signature: string | undefined,
  rawBody: string,
  now: number,
): boolean {
  if (!timestamp || !signature || !/^[0-9]{1,12}$/.test(timestamp)) return false;
  if (Math.abs(now - Number(timestamp) * 1000) > SLACK_SIGNATURE_MAX_AGE_MS) return false;
  const expected = Buffer.from(slackSignature(signingSecret, timestamp, rawBody));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The `X-Slack-Signature` of a body at a timestamp (seconds). */
export function slackSignature(signingSecret: string, timestamp: string, rawBody: string): string {
  return `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${rawBody}`).digest('hex')}`;
}

/** A parsed Events API request. */
export type SlackPush =
  /** The endpoint check when the Request URL is set: answer the challenge. */
  | { kind: 'challenge'; challenge: string }
  /** An event, keyed by its id; `inbound` null when it carries nothing for the agent. */
  | { kind: 'event'; eventId: string; inbound: ChannelInbound | null }
  | { kind: 'malformed'; reason: string };

interface SlackEvent {
  type?: string;
  subtype?: string;
  files?: { id?: string; name?: string; size?: number; url_private_download?: string }[];
  bot_id?: string;
  user?: string;
  channel?: string;
  channel_type?: string;
  text?: string;
  ts?: string;
  thread_ts?: string;
}

/**
 * What one Events API body is for this channel. Messages from bots (this one included)
 * and edits or joins (any subtype) reach nobody. `respondTo: 'all'` takes `message`
 * events (the app subscribes to message.channels / message.im) and skips `app_mention`,
 * which Slack sends beside the same message; `mention` takes `app_mention` in channels
 * and `message` in direct messages only. A mention of the bot is cut from the text.
 */
export function parseSlackPush(channel: Pick<Channel, 'respondTo'>, body: unknown): SlackPush {
  if (typeof body !== 'object' || body === null) return { kind: 'malformed', reason: 'not a JSON object' };
  const b = body as { type?: unknown; challenge?: unknown; event_id?: unknown; event?: SlackEvent };
  if (b.type === 'url_verification' && typeof b.challenge === 'string')
    return { kind: 'challenge', challenge: b.challenge };
  if (b.type !== 'event_callback' || typeof b.event_id !== 'string' || typeof b.event !== 'object')
    return {
      kind: 'malformed',
      reason: 'neither url_verification nor an event_callback with event_id and event',
    };
  const e = b.event;
  const wanted =
    e.type === 'message'
      ? channel.respondTo === 'all' || e.channel_type === 'im'
      : e.type === 'app_mention' && channel.respondTo === 'mention';
  // A message with files is a `file_share`; every other subtype is an edit, a join, a bot's.
  const subtypeOk = e.subtype === undefined || e.subtype === 'file_share';
  if (!wanted || !subtypeOk || e.bot_id !== undefined || !e.user || !e.channel || !e.ts)
    return { kind: 'event', eventId: b.event_id, inbound: null };
  const thread = e.thread_ts ?? e.ts;
  return {
    kind: 'event',
    eventId: b.event_id,
    inbound: {
      updateId: 0,
      chatId: e.channel,
      chatType: e.channel_type ?? 'channel',
      userId: e.user,
      username: null,
      // Replies go into the message's thread (a message outside one roots it).
      messageId: thread,
      threadId: thread,
      text: (e.text ?? '').replace(/<@[A-Z0-9]+>\s*/g, '').trim(),
      ...(e.files?.length ? { attachments: slackAttachmentsOf(e.files) } : {}),
    },
  };
}

/** A message's files, each with its download URL; one without (a deleted file, an external link) is skipped. */
function slackAttachmentsOf(files: NonNullable<SlackEvent['files']>): ChannelAttachment[] {
  return files.flatMap((f) =>
    typeof f.id === 'string' && typeof f.url_private_download === 'string'
      ? [
          {
            id: f.id,
            name: f.name ?? f.id,
            sizeBytes: typeof f.size === 'number' ? f.size : null,
            url: f.url_private_download,
          },
        ]
      : [],
  );
}

export function slackClientFactory(options: Pick<SlackOptions, 'apiUrl'>) {
  return (channel: Channel, { token, appToken }: ChannelSecrets): PlatformClient =>
    new SlackClient({ ...options, token, appToken, respondTo: channel.respondTo });
}
