/**
 * One leased channel of a ChannelRunner (channel-runner.ts): its receive (or listen) loop
 * and its send loop (channel-sender.ts), stopped together. Every update or event is committed in one store
 * transaction before the platform is acknowledged; every part sent is recorded with the
 * platform's id, fenced by the attempt. Writes stop when this process's lease lapses.
 */
import type { Logger } from 'pino';
import { type Channel, failpoint, sleep, WakeSignal } from '../core/index.js';
import {
  type ChannelEvent,
  type PlatformClient,
  type PlatformFailure,
  platformFailureOf,
} from './channel.js';
import { stageAllowedFiles } from './channel-inbox.js';
import type { ChannelRunnerDeps } from './channel-runner.js';
import { ChannelSender } from './channel-sender.js';

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
    const sender = new ChannelSender({
      ...this.deps,
      channelId: this.channel.id,
      client: this.client,
      ownerId: this.ownerId,
      log: this.log,
      signal: this.abort.signal,
      wake: this.sendSignal,
      isActive: () => this.active,
      noteError: (error) => this.noteError(error),
    });
    this.loops = [sender.run()];
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
          const staged = await stageAllowedFiles(
            this.deps,
            this.channel,
            this.client,
            inbound,
            null,
            pollSignal,
          );
          failpoint('channel-before-commit');
          const outcome = await store.commitChannelInbound(
            this.channel.id,
            this.ownerId,
            staged,
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
      const inbound =
        event.inbound &&
        (await stageAllowedFiles(this.deps, this.channel, this.client, event.inbound, event.eventId, signal));
      failpoint('channel-before-commit');
      const outcome = await store.commitChannelEvent(this.channel.id, event.eventId, inbound, clock.now());
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
}
