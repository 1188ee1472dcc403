/**
 * One leased channel of a ChannelRunner (channel-runner.ts): its receive (or listen) loop
 * and its send loop, stopped together. Every update or event is committed in one store
 * transaction before the platform is acknowledged; every part sent is recorded with the
 * platform's id, fenced by the attempt. Writes stop when this process's lease lapses.
 */
import type { Logger } from 'pino';
import { type Channel, failpoint, sleep, splitChannelText, WakeSignal } from '../core/index.js';
import type { ChannelRunnerStore } from '../store/index.js';
import {
  type ChannelEvent,
  type PlatformClient,
  type PlatformFailure,
  platformFailureOf,
} from './channel.js';
import type { ChannelRunnerDeps } from './channel-runner.js';
import { decideChannelSendFailure } from './decide-send.js';

/** How long a send may take before the outbox lets it be taken again. */
const SEND_LEASE_MS = 60_000;
/** The send loop's floor, should a store notification be missed. */
const SEND_POLL_MS = 1_000;
const RECEIVE_BACKOFF = { firstMs: 1_000, maxMs: 30_000 };

/** How long a failed read waits: what a rate limit asks, else a backoff by failures in a row. */
function receiveDelayMs(failure: PlatformFailure, failures: number): number {
  return failure.kind === 'rate-limited'
    ? failure.retryAfterMs
    : Math.min(RECEIVE_BACKOFF.maxMs, RECEIVE_BACKOFF.firstMs * 2 ** (failures - 1));
}

/** One leased channel: its receive and send loops, stopped together. */
export class ChannelLoop {
  private readonly abort = new AbortController();
  private readonly sendSignal = new WakeSignal();
  private loops: Promise<void>[] = [];
  private lastError: string | null;
  private readonly log: Logger;

  constructor(
    private readonly deps: ChannelRunnerDeps,
    private readonly channel: Channel,
    private readonly client: PlatformClient,
    private readonly ownerId: string,
    /** Until when this process holds the lease, as it last renewed it. */
    public leaseUntil: number,
  ) {
    this.lastError = channel.lastError;
    this.log = deps.log.child({ channelId: channel.id });
  }

  start(): void {
    this.loops = [this.sendLoop()];
    // A client that listens (a connection of its own, or a webhook it registers) is not polled;
    // one with neither (Slack's Events API) has its updates committed by the API route.
    if (this.client.listen) this.loops.push(this.listenLoop(this.client.listen.bind(this.client)));
    else if (this.client.receive) this.loops.push(this.receiveLoop(this.client.receive.bind(this.client)));
  }

  wakeSender(): void {
    this.sendSignal.notify();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.sendSignal.notify();
    await Promise.all(this.loops);
  }

  private get active(): boolean {
    return !this.abort.signal.aborted && this.deps.clock.now() < this.leaseUntil;
  }

  private async noteError(error: string | null): Promise<void> {
    if (error === this.lastError) return;
    this.lastError = error;
    await this.deps.store.recordChannelError(this.channel.id, error).catch(() => {});
  }

  private async receiveLoop(receive: NonNullable<PlatformClient['receive']>): Promise<void> {
    const { store, clock } = this.deps;
    const signal = this.abort.signal;
    let cursor = this.channel.cursor;
    let failures = 0;
    while (!signal.aborted) {
      if (!this.active) {
        // The lease lapsed: read nothing until the runner renews it or stops this loop.
        await sleep(this.deps.leaseMs / 5, signal).catch(() => {});
        continue;
      }
      // A poll never outlasts this process's lease: another process may take the channel
      // then, and two polls at once are what Telegram answers 409 Conflict. The platform's
      // wait ends a second before the lease (at least 1 s: a shorter one would spin), and
      // the request is cut at the lease's end should it run over.
      const leaseLeftMs = this.leaseUntil - clock.now();
      const waitMs = Math.max(1_000, Math.min(this.deps.pollTimeoutMs, leaseLeftMs - 1_000));
      const pollSignal = AbortSignal.any([signal, AbortSignal.timeout(Math.max(1, leaseLeftMs))]);
      try {
        const updates = await receive(cursor, waitMs, pollSignal);
        for (const inbound of updates) {
          if (!this.active) break;
          if (inbound.updateId < cursor) continue;
          failpoint('channel-before-commit');
          const outcome = await store.commitChannelInbound(
            this.channel.id,
            this.ownerId,
            inbound,
            clock.now(),
          );
          this.log.debug({ updateId: inbound.updateId, outcome }, 'Channel update committed');
          if (outcome === 'stale') {
            // Another process took the channel, or applied this update: re-read where it stands.
            const fresh = (await store.listChannels()).find((c) => c.id === this.channel.id);
            cursor = Math.max(cursor, fresh?.cursor ?? cursor);
            break;
          }
          cursor = inbound.updateId + 1;
          if (outcome === 'enqueue') void this.client.showTyping(inbound.chatId, signal).catch(() => {});
        }
        failures = 0;
        await this.noteError(null);
      } catch (err) {
        if (signal.aborted) break;
        if (pollSignal.aborted) continue; // the lease's end cut the poll: renewed, or given up
        failures += 1;
        const delayMs = receiveDelayMs(platformFailureOf(err), failures);
        this.log.warn({ err, delayMs }, 'Channel receive failed');
        await this.noteError(err instanceof Error ? err.message : String(err));
        await sleep(delayMs, signal).catch(() => {});
      }
    }
  }

  private async listenLoop(listen: NonNullable<PlatformClient['listen']>): Promise<void> {
    const { store, clock } = this.deps;
    const signal = this.abort.signal;
    let failures = 0;
    const commit = async (event: ChannelEvent): Promise<void> => {
      failpoint('channel-before-commit');
      const outcome = await store.commitChannelEvent(
        this.channel.id,
        event.eventId,
        event.inbound,
        clock.now(),
      );
      this.log.debug({ eventId: event.eventId, outcome }, 'Channel event committed');
      // Paused or removed: the runner stops this loop; nothing more is taken meanwhile.
      if (outcome === 'stale') throw new Error('channel paused or removed');
      if (outcome === 'enqueue' && event.inbound)
        void this.client.showTyping(event.inbound.chatId, signal).catch(() => {});
      failures = 0;
      await this.noteError(null);
    };
    while (!signal.aborted) {
      if (!this.active) {
        await sleep(this.deps.leaseMs / 5, signal).catch(() => {});
        continue;
      }
      try {
        await listen(commit, signal);
      } catch (err) {
        if (signal.aborted) break;
        failures += 1;
        const delayMs = receiveDelayMs(platformFailureOf(err), failures);
        this.log.warn({ err, delayMs }, 'Channel connection failed; reconnecting');
        await this.noteError(err instanceof Error ? err.message : String(err));
        await sleep(delayMs, signal).catch(() => {});
      }
    }
  }

  private async sendLoop(): Promise<void> {
    const { store, clock } = this.deps;
    const signal = this.abort.signal;
    while (!signal.aborted) {
      let waitMs = SEND_POLL_MS;
      try {
        const item = this.active
          ? await store.takeChannelSend(this.channel.id, this.ownerId, clock.now(), SEND_LEASE_MS)
          : null;
        if (item) {
          waitMs = await this.deliver(item);
        } else {
          const next = await store.nextChannelSendAt(this.channel.id);
          if (next !== null) waitMs = Math.max(0, Math.min(SEND_POLL_MS * 5, next - clock.now()));
        }
      } catch (err) {
        this.log.warn({ err }, 'Channel send loop failed');
      }
      if (waitMs > 0) await this.sendSignal.wait(waitMs);
    }
  }

  /** Sends the parts not yet recorded; returns how long to wait before the next take (0 = at once). */
  private async deliver(
    item: Awaited<ReturnType<ChannelRunnerStore['takeChannelSend']>> & {},
  ): Promise<number> {
    const { store, clock, sendPolicy } = this.deps;
    const signal = this.abort.signal;
    const parts = splitChannelText(item.text, this.client.maxTextLength);
    const progress = { ...item };
    for (let part = item.partsSent; part < parts.length; part++) {
      if (!this.active) return SEND_POLL_MS;
      failpoint('channel-before-send');
      let platformId: string;
      // Every part answers the user's message, so each reads in context.
      const message = {
        chatId: item.chatId,
        text: parts[part]!,
        replyTo: item.replyTo,
        key: `${item.id}.${part}`,
      };
      try {
        // Taken before: a crash may have come between this part's send and its record.
        const landed =
          item.attempts > 1 && this.client.findSent ? await this.client.findSent(message, signal) : null;
        if (landed !== null)
          this.log.info({ outboxId: item.id, part }, 'Channel send found already sent; not resent');
        platformId = landed ?? (await this.client.send(message, signal));
      } catch (err) {
        if (signal.aborted) return 0;
        const failure = platformFailureOf(err);
        const now = clock.now();
        const decision = decideChannelSendFailure(failure, item.attempts, now, sendPolicy);
        const fields = { outboxId: item.id, attempt: item.attempts, part, failure };
        const error = err instanceof Error ? err.message : String(err);
        switch (decision.action) {
          case 'wait':
            this.log.info({ ...fields, delayMs: decision.delayMs }, 'Channel send rate limited; waiting');
            break;
          case 'retry':
            this.log.warn({ ...fields, delayMs: decision.delayMs }, 'Channel send failed; retrying');
            break;
          case 'dead':
            this.log.warn(fields, 'Channel send dead-lettered');
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
        await this.noteError(error);
        return 0;
      }
      failpoint('channel-after-send');
      const done = part === parts.length - 1;
      if (!(await store.recordChannelPartSent(progress, platformId, done, clock.now()))) {
        this.log.warn({ outboxId: item.id, part }, 'Channel send record stale; another process took it');
        return 0;
      }
      progress.partsSent += 1;
      progress.platformMessageIds = [...progress.platformMessageIds, platformId];
    }
    this.log.debug({ outboxId: item.id, kind: item.kind, parts: parts.length }, 'Channel send done');
    return 0;
  }
}
