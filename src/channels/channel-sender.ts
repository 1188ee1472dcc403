/**
 * The send loop of one leased channel: takes the outbox's oldest pending send (written with
 * its reply or failure event), sends it part by part, and records each part's platform
 * message id fenced by the attempt. A crash between a part's send and its record: where the
 * platform can be read back (Slack), the next attempt finds the part by its key and
 * records it without sending; elsewhere the part is sent again (at-least-once: Telegram
 * has no idempotency key and a bot cannot read its chat back). 429s wait what the platform
 * asked and lose nothing. The parts are cut the same way on every attempt (a pure
 * function of the text), so `parts_sent` always counts the same parts.
 */
import type { Logger } from 'pino';
import type { BlobStore } from '../blobs/index.js';
import {
  type Clock,
  failpoint,
  type InboxFile,
  OUTBOX_DIR,
  type RetryPolicy,
  splitChannelText,
  type WakeSignal,
} from '../core/index.js';
import type { ChannelRunnerStore } from '../store/index.js';
import { type ChannelPart, type ChannelSend, type PlatformClient, platformFailureOf } from './channel.js';
import { decideChannelSendFailure } from './decide-send.js';

/** How long a send may take before the outbox lets it be taken again. */
const SEND_LEASE_MS = 60_000;
/** The send loop's floor, should a store notification be missed. */
export const SEND_POLL_MS = 1_000;

type TakenSend = Awaited<ReturnType<ChannelRunnerStore['takeChannelSend']>> & {};

export interface ChannelSenderDeps {
  store: ChannelRunnerStore;
  clock: Clock;
  sendPolicy: RetryPolicy;
  /** Where the files a turn sends wait. */
  blobs: BlobStore;
  channelId: string;
  client: PlatformClient;
  ownerId: string;
  log: Logger;
  signal: AbortSignal;
  /** Notified when the outbox may have a send due. */
  wake: WakeSignal;
  /** Whether this process still holds the channel's lease. */
  isActive(): boolean;
  /** Shows a failure (or its end, null) as the channel's last error. */
  noteError(error: string | null): Promise<void>;
}

/** A reply's parts as the platform takes them: its own cut and markup, else plain text cut at its limit. */
export function partsOf(client: PlatformClient, text: string): ChannelPart[] {
  return (
    client.parts?.(text) ?? splitChannelText(text, client.maxTextLength).map((plain) => ({ text: plain }))
  );
}

export class ChannelSender {
  constructor(private readonly deps: ChannelSenderDeps) {}

  async run(): Promise<void> {
    const { store, clock, signal, log } = this.deps;
    while (!signal.aborted) {
      let waitMs = SEND_POLL_MS;
      try {
        const item = this.deps.isActive()
          ? await store.takeChannelSend(this.deps.channelId, this.deps.ownerId, clock.now(), SEND_LEASE_MS)
          : null;
        if (item) {
          waitMs = await this.deliver(item);
        } else {
          const next = await store.nextChannelSendAt(this.deps.channelId);
          if (next !== null) waitMs = Math.max(0, Math.min(SEND_POLL_MS * 5, next - clock.now()));
        }
      } catch (err) {
        log.warn({ err }, 'Channel send loop failed');
      }
      if (waitMs > 0) await this.deps.wake.wait(waitMs);
    }
  }

  /** A file from the blob store as a document; where the platform takes none, a text naming it instead. */
  private async sendFile(message: ChannelSend, file: InboxFile): Promise<string> {
    const { client, blobs, signal } = this.deps;
    if (!client.sendFile)
      return client.send(
        {
          ...message,
          text: `The agent wrote ${OUTBOX_DIR}/${file.name} (${file.size} bytes) for you; files cannot be sent here yet.`,
        },
        signal,
      );
    const read = await blobs.get(file.key);
    return client.sendFile(message, { name: file.name, size: file.size, body: read.body }, signal);
  }

  /** Sends the parts not yet recorded; returns how long to wait before the next take (0 = at once). */
  private async deliver(item: TakenSend): Promise<number> {
    const { store, clock, sendPolicy, client, signal, log } = this.deps;
    // A file is one part: the document itself.
    const parts = item.file ? [{ text: item.text }] : partsOf(client, item.text);
    const progress = { ...item };
    for (let part = item.partsSent; part < parts.length; part++) {
      if (!this.deps.isActive()) return SEND_POLL_MS;
      failpoint('channel-before-send');
      let platformId: string;
      // Every part answers the user's message, so each reads in context.
      const message = {
        chatId: item.chatId,
        ...parts[part]!,
        replyTo: item.replyTo,
        key: `${item.id}.${part}`,
      };
      try {
        // Taken before: a crash may have come between this part's send and its record.
        const landed = item.attempts > 1 && client.findSent ? await client.findSent(message, signal) : null;
        if (landed !== null)
          log.info({ outboxId: item.id, part }, 'Channel send found already sent; not resent');
        platformId =
          landed ?? (await (item.file ? this.sendFile(message, item.file) : client.send(message, signal)));
      } catch (err) {
        if (signal.aborted) return 0;
        const failure = platformFailureOf(err);
        const now = clock.now();
        const decision = decideChannelSendFailure(failure, item.attempts, now, sendPolicy);
        const fields = { outboxId: item.id, attempt: item.attempts, part, failure };
        const error = err instanceof Error ? err.message : String(err);
        switch (decision.action) {
          case 'wait':
            log.info({ ...fields, delayMs: decision.delayMs }, 'Channel send rate limited; waiting');
            break;
          case 'retry':
            log.warn({ ...fields, delayMs: decision.delayMs }, 'Channel send failed; retrying');
            break;
          case 'dead':
            log.warn(fields, 'Channel send dead-lettered');
            break;
        }
        await store.endChannelSendAttempt(
          item,
          decision.action === 'dead' ? null : decision.nextAttemptAt,
          error,
          now,
        );
        // A rate limit is the platform's pacing, not an error of the channel: the whole channel waits it out.
        if (decision.action === 'wait') return decision.delayMs;
        await this.deps.noteError(error);
        return 0;
      }
      failpoint('channel-after-send');
      const done = part === parts.length - 1;
      if (!(await store.recordChannelPartSent(progress, platformId, done, clock.now()))) {
        log.warn({ outboxId: item.id, part }, 'Channel send record stale; another process took it');
        return 0;
      }
      progress.partsSent += 1;
      progress.platformMessageIds = [...progress.platformMessageIds, platformId];
    }
    log.debug({ outboxId: item.id, kind: item.kind, parts: parts.length }, 'Channel send done');
    return 0;
  }
}
