/**
 * The one interface every chat platform implements: read updates from a cursor (or have
 * them pushed to berth's API instead), send a text to a chat in reply to one of its
 * messages, find a send that landed before a crash where the platform can be read back,
 * show that the agent is working. A platform knows nothing of the store: the runner
 * (channel-runner.ts) commits what it reads and records what it sends. Adding a platform
 * is one file implementing this, plus its tests against a fake of its wire protocol.
 */
import type { Channel, ChannelInbound, ChannelPlatform } from '../core/index.js';

export interface ChannelSend {
  chatId: string;
  text: string;
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
   * The updates from `cursor` on, in order, waiting up to `waitMs` (whole seconds) for
   * one; [] when none came. Reading does not acknowledge: a platform forgets an update only
   * when asked for a later cursor (Telegram: getUpdates with offset = update_id + 1).
   * Updates that carry no text come back with text '' (they move the cursor only).
   * Absent on a platform that pushes its updates to berth's API instead (Slack).
   */
  receive?(cursor: number, waitMs: number, signal: AbortSignal): Promise<ChannelInbound[]>;
  /**
   * Keeps the platform's connection open in the lease holder until `signal`, handing each
   * event to `commit` (which resolves once it is in the store) before moving on. Rejects
   * with a PlatformError when the connection failed: the runner backs off and calls again.
   * Present on a platform that pushes over a connection berth opens (Discord's Gateway, IMAP IDLE).
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
  /** Best effort: the platform's typing indicator in the chat. */
  showTyping(chatId: string, signal: AbortSignal): Promise<void>;
}

/** Builds the client of a channel from its row and its bot token (read from the host's secret store). */
export type PlatformClientFactory = (channel: Channel, token: string) => PlatformClient;

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

/** A thrown value as a PlatformFailure: anything that is not a PlatformError is transient. */
export function platformFailureOf(err: unknown): PlatformFailure {
  if (err instanceof PlatformError) return err.failure;
  return { kind: 'transient', description: err instanceof Error ? err.message : String(err) };
}
