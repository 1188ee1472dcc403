/**
 * The database server's clock, as this process sees it: the local clock plus an offset
 * measured against PostgreSQL (the server's clock_timestamp() minus the midpoint of the
 * query's round trip). Every `now` a worker or the API passes to the store comes from it,
 * so leases, heartbeats and backoffs are judged by one clock, the database's, however far
 * the machines' own clocks are apart (clock skew).
 *
 * Invariants: the error is at most half the round trip of the kept sample (the shortest of
 * the last SAMPLES_KEPT, all of the current server: a failover forgets the others); a
 * failed measurement keeps the last offset; before the first
 * measurement the offset is 0 (the opening store measures once before it is used).
 */
import type { Clock } from '../../core/index.js';

const SYNC_INTERVAL_MS = 5000;
const SAMPLES_KEPT = 5;

export class DatabaseClock implements Clock {
  private offsetMs = 0;
  private samples: { rttMs: number; offsetMs: number }[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    /** The server's time now, in epoch ms. */
    private readonly serverNow: () => Promise<number>,
    private readonly local: Clock = { now: () => Date.now() },
  ) {}

  now(): number {
    return this.local.now() + this.offsetMs;
  }

  /** One measurement; the offset becomes that of the shortest round trip among the last few. */
  async sync(): Promise<void> {
    const sentAt = this.local.now();
    const server = await this.serverNow();
    const receivedAt = this.local.now();
    this.samples = [
      ...this.samples.slice(-(SAMPLES_KEPT - 1)),
      // Whole milliseconds: times are stored as BIGINT.
      { rttMs: receivedAt - sentAt, offsetMs: Math.round(server - (sentAt + receivedAt) / 2) },
    ];
    this.offsetMs = this.samples.reduce((best, s) => (s.rttMs < best.rttMs ? s : best)).offsetMs;
  }

  /** Forgets the samples (the server changed: a failover) and measures at once; the offset stays until a measurement succeeds. */
  resync(onError: (err: unknown) => void): void {
    this.samples = [];
    this.sync().catch(onError);
  }

  /** Measures again every SYNC_INTERVAL_MS until `stop`; failures keep the last offset. */
  start(onError: (err: unknown) => void): void {
    this.timer ??= setInterval(() => this.sync().catch(onError), SYNC_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
