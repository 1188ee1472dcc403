/**
 * The one interface every chat platform implements: read updates from a cursor (or have
 * them pushed to berth's API instead), send a text to a chat in reply to one of its
 * messages, find a send that landed before a crash where the platform can be read back,
 * show that the agent is working. A platform knows nothing of the store: the runner
 * (channel-runner.ts) commits what it reads and records what it sends. Adding a platform
 * is one file implementing this, plus its tests against a fake of its wire protocol.
 */
import type { Channel, ChannelAttachment, ChannelInbound, ChannelPlatform } from '../core/index.js';

/** One part of a reply as it is sent. */
export interface ChannelPart {
  /** The part as plain text: what is sent where the platform has no markup, or refuses it. */
  text: string;
  /** The same part in the platform's markup (Telegram: MarkdownV2); absent = plain text only. */
  formatted?: string;
}

export interface ChannelSend extends ChannelPart {
  chatId: string;
  /** The platform's id of the message answered (Slack: the thread it is in), or null. */
  replyTo: string | null;
  /** berth's id of this send (outbox row and part): carried where the platform keeps it, so findSent can find it. */
  key: string;
}

/** A pushed message, keyed by the platform's id of it (committed once per id); `inbound` null when it reaches nobody. */
export interface ChannelEvent {
  eventId: string;
  inbound: ChannelInbound | null;
}

export interface PlatformClient {
  readonly platform: ChannelPlatform;
  /** The longest text one send may carry (longer replies are cut into parts). */
  readonly maxTextLength: number;
  /**
   * Cuts a reply into the parts it is sent in, each in the platform's markup and within its
   * limit; absent = plain text cut by splitChannelText at maxTextLength. A pure function of
   * the text: a retried send skips the parts already recorded, so the cut must not change.
   */
  parts?(text: string): ChannelPart[];
  /**
   * The updates from `cursor` on, in order, waiting up to `waitMs` (whole seconds) for
   * one; [] when none came. Reading does not acknowledge: a platform forgets an update only
   * when asked for a later cursor (Telegram: getUpdates with offset = update_id + 1).
   * Updates that carry no text come back with text '' (they move the cursor only).
   * Absent on a platform that pushes its updates to berth's API instead (Slack); unused
   * when the client has `listen` (Telegram in webhook mode).
   */
  receive?(cursor: number, waitMs: number, signal: AbortSignal): Promise<ChannelInbound[]>;
  /**
   * Keeps the platform's connection open in the lease holder until `signal`, handing each
   * event to `commit` (which resolves once it is in the store) before moving on. Rejects
   * with a PlatformError when the connection failed: the runner backs off and calls again.
   * Present on a platform that pushes over a connection berth opens (Discord's Gateway,
   * Slack's Socket Mode, IMAP IDLE), or that is told once where to push (Telegram's
   * setWebhook: it registers, then holds until `signal`).
   */
  listen?(commit: (event: ChannelEvent) => Promise<void>, signal: AbortSignal): Promise<void>;
  /** Sends; resolves to the platform's id of the message it created. */
  send(message: ChannelSend, signal: AbortSignal): Promise<string>;
  /**
   * The platform's id of the message an earlier attempt of this send (same key) created,
   * or null when none landed. Asked before a send that was taken before (a crash may have
   * come between its send and its record). Absent where a bot cannot read its chat back
   * (Telegram): such a send is repeated (at-least-once).
   */
  findSent?(message: ChannelSend, signal: AbortSignal): Promise<string | null>;
  /** The largest file `download` can fetch (Telegram's Bot API: 20 MB; Discord: 10 MiB); absent where messages carry no files. */
  readonly maxFileBytes?: number;
  /**
   * The bytes of a file sent with a message. Rejects with a PlatformError: refused when the
   * platform will not hand it over (too big, gone), else transient.
   */
  download?(attachment: ChannelAttachment, signal: AbortSignal): Promise<AsyncIterable<Uint8Array>>;
  /**
   * Sends a file as a document in reply (Telegram: sendDocument; Discord: a multipart
   * create); resolves to the platform's id of the message it created. Absent where berth
   * sends no files yet: a text names it.
   */
  sendFile?(message: ChannelSend, file: ChannelFile, signal: AbortSignal): Promise<string>;
  /** Best effort: the platform's typing indicator in the chat. */
  showTyping(chatId: string, signal: AbortSignal): Promise<void>;
}

/** A file a turn sends back, its bytes read from the blob store. */
export interface ChannelFile {
  name: string;
  size: number;
  body: AsyncIterable<Uint8Array>;
}

/** A file's bytes in one buffer: the platforms take an upload whole (a form part, a POST body). */
export async function fileBytes(file: ChannelFile): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of file.body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** The values of the secrets a channel names, read from the host's secret store. */
export interface ChannelSecrets {
  /** The bot token. */
  token: string;
  /** Telegram's webhook secret_token (webhook mode), Slack's signing secret; null when the channel names none. */
  signingSecret: string | null;
  /** Slack's app-level token (Socket Mode); null when the channel names none. */
  appToken: string | null;
}

/** Builds the client of a channel from its row and its secrets. */
export type PlatformClientFactory = (channel: Channel, secrets: ChannelSecrets) => PlatformClient;

/** Why a platform call failed, as the runner acts on it. */
export type PlatformFailure =
  /** Too many requests: wait `retryAfterMs`, then the same call again. Never counts as a failure. */
  | { kind: 'rate-limited'; retryAfterMs: number }
  /** The platform refused the request for good (bad chat, bot blocked, bad token): no retry helps. */
  | { kind: 'refused'; status: number; description: string }
  /** No answer, a 5xx, a conflict: worth trying again after backoff. */
  | { kind: 'transient'; description: string };

export class PlatformError extends Error {
  constructor(
    readonly failure: PlatformFailure,
    options?: { cause?: unknown },
  ) {
    super(
      failure.kind === 'rate-limited'
        ? `rate limited for ${failure.retryAfterMs} ms`
        : failure.kind === 'refused'
          ? `refused (${failure.status}): ${failure.description}`
          : failure.description,
      options,
    );
    this.name = 'PlatformError';
  }
}

/** A thrown value as a PlatformError: anything else becomes a transient failure, described after `what` (e.g. `Discord Gateway`). */
export function asPlatformError(err: unknown, what: string): PlatformError {
  if (err instanceof PlatformError) return err;
  return new PlatformError(
    { kind: 'transient', description: `${what}: ${err instanceof Error ? err.message : String(err)}` },
    { cause: err },
  );
}

/**
 * A file's bytes fetched, or sent, outside the platform's JSON API (a download, an upload
 * URL): the answer's body when 2xx, else a PlatformError, transient for no answer or a 5xx,
 * refused otherwise. `what` names it in errors (never the URL: it may hold a token).
 */
export async function fetchPlatformFile(
  url: string,
  init: RequestInit,
  what: string,
): Promise<ReadableStream<Uint8Array>> {
  let res: Response;
  try {
    res = await fetch(url, init);
  } catch (err) {
    throw new PlatformError({ kind: 'transient', description: `${what}: no answer` }, { cause: err });
  }
  if (res.ok && res.body) return res.body;
  await res.body?.cancel();
  const description = `${what}: answered ${res.status}`;
  throw new PlatformError(
    res.status >= 500
      ? { kind: 'transient', description }
      : { kind: 'refused', status: res.status, description },
  );
}

/** A WebSocket text frame's JSON object, or null when it is not one (binary, not JSON, not an object). */
export function jsonObjectOf(raw: unknown): Record<string, unknown> | null {
  if (typeof raw !== 'string') return null;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return null;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

/** A thrown value as a PlatformFailure: anything that is not a PlatformError is transient. */
export function platformFailureOf(err: unknown): PlatformFailure {
  if (err instanceof PlatformError) return err.failure;
  return { kind: 'transient', description: err instanceof Error ? err.message : String(err) };
}
