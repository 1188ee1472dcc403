/**
 * Runs the channels of the store in this host process: one runner per process, any number
 * of processes on one store. Each channel is driven by the one process holding its lease
 * (a row in the store, renewed every lease/5; a process that stops renewing loses it after
 * `leaseMs` and another takes it over), so only one process polls a bot and sends for it.
 *
 * Per leased channel, two loops:
 * - **receive**: read updates from the store's cursor; commit each (cursor moved past it
 *   + its message enqueued, or a refusal owed) in ONE transaction fenced by the lease and
 *   the cursor; only then ask the platform for the next cursor, which acknowledges it. A
 *   crash before the commit re-reads the update; after it, the cursor skips it.
 * - **send**: take the outbox's oldest pending send (written with its reply or failure
 *   event), send it part by part, record each part's platform message id. A crash between
 *   a part's send and its record: where the platform can be read back (Slack), the next
 *   attempt finds the part by its key and records it without sending; elsewhere the part
 *   is sent again (at-least-once: Telegram has no idempotency key and a bot cannot read
 *   its chat back). 429s wait what the platform asked and lose nothing.
 *
 * A platform that pushes its updates (Slack) has no receive loop: berth's API commits them.
 * One whose pushes come over a connection berth opens (Discord's Gateway, an IMAP mailbox
 * in IDLE) has a **listen** loop instead, in the lease holder only: each event committed
 * once by its id (store.commitChannelEvent) before the platform client moves past it (or,
 * for mail, flags it \Seen).
 *
 * Status is data: a channel's last error is written on the channel row (berth channel list).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import {
  type Channel,
  type ChannelPlatform,
  type Clock,
  failpoint,
  type RetryPolicy,
  sleep,
  splitChannelText,
  WakeSignal,
} from '../core/index.js';
import type { ChannelRunnerStore } from '../store/index.js';
import {
  type ChannelEvent,
  type PlatformClient,
  type PlatformClientFactory,
  type PlatformFailure,
  platformFailureOf,
} from './channel.js';
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

export interface ChannelRunnerDeps {
  store: ChannelRunnerStore;
  clock: Clock;
  log: Logger;
  /** The host's secret store: bot tokens by name. */
  secrets: { get(name: string): Promise<string | undefined> };
  clients: Partial<Record<ChannelPlatform, PlatformClientFactory>>;
  /** A channel's lease; renewed every leaseMs / 5. */
  leaseMs: number;
  /** The longest wait of one long poll (it also ends a second before the lease does). */
  pollTimeoutMs: number;
  /** A send's retries: backoff from retryBaseMs to retryMaxMs, dead after maxTries attempts. */
  sendPolicy: RetryPolicy;
}

export class ChannelRunner {
  /** This process, as channel leases name it: its pid, for an operator looking for it. */
  readonly ownerId = `chr_${process.pid}_${randomBytes(4).toString('hex')}`;
  private readonly running = new Map<string, ChannelLoop>();
  private readonly wakeSignal = new WakeSignal();
  private stopped = false;
  private loop: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;

  constructor(private readonly deps: ChannelRunnerDeps) {}

  start(): void {
    this.unsubscribe = this.deps.store.onChange((c) => {
      if (c.type === 'channel-outbox') this.running.get(c.channelId)?.wakeSender();
    });
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.wakeSignal.notify();
    await this.loop;
    await Promise.all([...this.running.values()].map((l) => l.stop()));
    for (const id of this.running.keys())
      await this.deps.store.releaseChannelLease(id, this.ownerId).catch(() => {});
    this.running.clear();
  }

  /** Level-triggered: every pass re-reads the channels and renews or takes their leases. */
  private async run(): Promise<void> {
    const { log, leaseMs } = this.deps;
    while (!this.stopped) {
      try {
        await this.reconcile();
      } catch (err) {
        log.warn({ err }, 'Channel reconcile failed');
      }
      await this.wakeSignal.wait(leaseMs / 5);
    }
  }

  private async reconcile(): Promise<void> {
    const { store, clock, log, leaseMs } = this.deps;
    const channels = await store.listChannels();
    const live = new Set(channels.map((c) => c.id));
    for (const [id, loop] of this.running)
      if (!live.has(id)) {
        this.running.delete(id);
        await loop.stop();
        log.info({ channelId: id }, 'Channel stopped: removed');
      }
    for (const channel of channels) {
      if (this.stopped) return;
      const mine = this.running.get(channel.id);
      if (!mine && channel.leaseOwner !== null && channel.leaseUntil >= clock.now()) continue;
      const now = clock.now();
      const held = !channel.paused && (await store.takeChannelLease(channel.id, this.ownerId, now, leaseMs));
      if (mine) {
        if (held) mine.leaseUntil = now + leaseMs;
        else {
          this.running.delete(channel.id);
          await mine.stop();
          // Paused: give the lease up at once, so status shows nobody driving it.
          await store.releaseChannelLease(channel.id, this.ownerId);
          log.info({ channelId: channel.id, paused: channel.paused }, 'Channel stopped: lease not renewed');
        }
        continue;
      }
      if (!held) continue;
      const client = await this.clientFor(channel);
      if (!client) {
        await store.releaseChannelLease(channel.id, this.ownerId);
        continue;
      }
      const loop = new ChannelLoop(this.deps, channel, client, this.ownerId, now + leaseMs);
      this.running.set(channel.id, loop);
      loop.start();
      log.info(
        { channelId: channel.id, platform: channel.platform, cursor: channel.cursor },
        'Channel started',
      );
    }
  }

  private async clientFor(channel: Channel): Promise<PlatformClient | null> {
    const { store, secrets, clients, log } = this.deps;
    const factory = clients[channel.platform];
    const token = await secrets.get(channel.tokenSecret).catch((err: unknown) => {
      log.warn({ err, channelId: channel.id }, 'Channel token unreadable');
      return undefined;
    });
    const error = !factory
      ? `no client for platform ${channel.platform} in this host`
      : token === undefined
        ? `CHANNEL_TOKEN_MISSING: secret ${channel.tokenSecret} is not in the host's secret store (berth secret set ${channel.tokenSecret})`
        : null;
    if (error !== null || !factory || token === undefined) {
      if (channel.lastError !== error) await store.recordChannelError(channel.id, error);
      return null;
    }
    return factory(channel, token);
  }
}

/** One leased channel: its receive and send loops, stopped together. */
class ChannelLoop {
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
    // A platform that pushes (Slack) has its updates committed by the API route instead.
    if (this.client.receive) this.loops.push(this.receiveLoop(this.client.receive.bind(this.client)));
    if (this.client.listen) this.loops.push(this.listenLoop(this.client.listen.bind(this.client)));
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
