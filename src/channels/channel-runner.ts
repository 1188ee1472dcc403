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
 * - **send** (channel-sender.ts): take the outbox's oldest pending send, send it part by
 *   part, record each part's platform message id.
 *
 * A platform that pushes its updates over HTTP (Slack's Events API) has no receive loop:
 * berth's API commits them. One whose pushes come over a connection berth opens (Discord's
 * Gateway, Slack's Socket Mode, an IMAP mailbox in IDLE) has a **listen** loop instead, in
 * the lease holder only: each event committed once by its id (store.commitChannelEvent)
 * before the platform client moves past it (or acknowledges it; a mail is flagged \Seen). Telegram in webhook mode listens too: it registers
 * the webhook, and its updates come to berth's API; a client that listens is not polled.
 *
 * Status is data: a channel's last error is written on the channel row (berth channel list).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { BlobStore } from '../blobs/index.js';
import {
  type Channel,
  type ChannelPlatform,
  type Clock,
  type RetryPolicy,
  WakeSignal,
} from '../core/index.js';
import type { ChannelRunnerStore } from '../store/index.js';
import type { PlatformClient, PlatformClientFactory } from './channel.js';
import { ChannelLoop } from './channel-loop.js';

export interface ChannelRunnerDeps {
  store: ChannelRunnerStore;
  clock: Clock;
  log: Logger;
  /** The host's secret store: bot tokens by name. */
  secrets: { get(name: string): Promise<string | undefined> };
  clients: Partial<Record<ChannelPlatform, PlatformClientFactory>>;
  /** Where the files users send are stored until a turn places them in the workspace. */
  blobs: BlobStore;
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
    const { store, clients } = this.deps;
    const factory = clients[channel.platform];
    const read = async (name: string | null) => (name === null ? null : await this.secret(channel, name));
    const [token, signingSecret, appToken] = await Promise.all(
      [channel.tokenSecret, channel.signingSecret, channel.appTokenSecret].map(read),
    );
    const missing = [
      [channel.tokenSecret, token],
      [channel.signingSecret, signingSecret],
      [channel.appTokenSecret, appToken],
    ].find(([name, value]) => name !== null && value === undefined)?.[0];
    const error = !factory
      ? `no client for platform ${channel.platform} in this host`
      : missing
        ? `CHANNEL_TOKEN_MISSING: secret ${missing} is not in the host's secret store (berth secret set ${missing})`
        : null;
    if (error !== null || !factory || typeof token !== 'string') {
      if (channel.lastError !== error) await store.recordChannelError(channel.id, error);
      return null;
    }
    return factory(channel, { token, signingSecret: signingSecret ?? null, appToken: appToken ?? null });
  }

  private async secret(channel: Channel, name: string): Promise<string | undefined> {
    return this.deps.secrets.get(name).catch((err: unknown) => {
      this.deps.log.warn({ err, channelId: channel.id }, 'Channel secret unreadable');
      return undefined;
    });
  }
}
