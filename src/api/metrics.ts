/**
 * Prometheus metrics (prom-client, one registry per host). Three sources:
 * - gauges read at scrape time from the counts the store keeps (O(1) in the number of
 *   sessions): sessions by state, inbound messages by status, running turns, active
 *   sandboxes; and the queue depth (a count on the queue's index), webhook deliveries by
 *   status (dead letters), warm pool size (a callback the worker provides; 0 until it does);
 * - counters and histograms derived from the events, as the API process's change feed
 *   delivers them (one reader per process; a scrape first lets it catch up), so they count
 *   every worker's turns, whichever process ran them, from this process's first scrape: turns
 *   started, turn run time (started → first reply), queue wait (queued → started),
 *   retries, failed messages, recovery time (retrying → next reply of the session);
 * - store call latency measured in this process (`timeStoreCalls`): commit, claim, enqueue.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Clock, SessionEvent } from '../core/index.js';
import type { ApiStore, Store } from '../store/index.js';
import type { ChangeFeed, Subscription } from './change-feed.js';

const SECONDS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export interface MetricsSources {
  store: ApiStore;
  clock: Clock;
  /** Pre-booted sandboxes waiting for a session; the worker's pool provides it. @default () => 0 */
  warmPoolSize?: () => number;
  /** This process's worker's workspace copies (workspace-budget.ts); absent or undefined = none. */
  workspaceCache?: () =>
    | { budgetBytes: number; bytes: number; hits: number; misses: number; evictions: number }
    | undefined;
}

export class BerthMetrics {
  readonly registry = new Registry();
  private feed: ChangeFeed | null = null;
  private following: Promise<Subscription> | null = null;
  private readonly turnStartedAt = new Map<string, number>();
  private readonly queuedAt = new Map<string, number>();
  private readonly retryingSince = new Map<string, number>();
  readonly storeCallSeconds: Histogram<'method'>;
  private readonly turnsStarted: Counter;
  private readonly turnSeconds: Histogram;
  private readonly queueWaitSeconds: Histogram;
  private readonly retries: Counter;
  private readonly failedMessages: Counter;
  private readonly recoverySeconds: Histogram;
  private readonly detectionSeconds: Histogram;
  private lastDetectedTurn = '';

  constructor(private readonly sources: MetricsSources) {
    const registers = [this.registry];
    const { store, clock } = sources;
    new Gauge({
      name: 'berth_queue_depth',
      help: 'Sessions waiting in the claim queue',
      registers,
      async collect() {
        this.set(await store.queueDepth(clock.now()));
      },
    });
    new Gauge({
      name: 'berth_sessions',
      help: 'Sessions by what the store counts of them (all, archived, held, leased, bound, waiting)',
      labelNames: ['status'],
      registers,
      async collect() {
        const counts = await store.sessionCounts();
        this.set({ status: 'all' }, counts.sessions);
        for (const status of ['archived', 'held', 'leased', 'bound', 'waiting'] as const)
          this.set({ status }, counts[status]);
      },
    });
    new Gauge({
      name: 'berth_inbound_messages',
      help: 'Inbound messages by status (pending, processing, failed)',
      labelNames: ['status'],
      registers,
      async collect() {
        for (const [status, n] of Object.entries((await store.sessionCounts()).messages))
          this.set({ status }, n);
      },
    });
    new Gauge({
      name: 'berth_running_turns',
      help: 'Turns running now',
      registers,
      async collect() {
        this.set((await store.sessionCounts()).runningTurns);
      },
    });
    new Gauge({
      name: 'berth_active_sandboxes',
      help: 'Sandboxes serving a session now',
      registers,
      async collect() {
        this.set((await store.sessionCounts()).bound);
      },
    });
    new Gauge({
      name: 'berth_warm_pool_size',
      help: 'Pre-booted sandboxes waiting for a session',
      registers,
      collect() {
        this.set(sources.warmPoolSize?.() ?? 0);
      },
    });
    const cache = () =>
      sources.workspaceCache?.() ?? { budgetBytes: 0, bytes: 0, hits: 0, misses: 0, evictions: 0 };
    for (const [name, help, read] of [
      ['berth_workspace_cache_bytes', 'Bytes of the workspace copies on the data dir', () => cache().bytes],
      [
        'berth_workspace_cache_budget_bytes',
        'Byte budget of the workspace copies (0 = none)',
        () => cache().budgetBytes,
      ],
    ] as const)
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read());
        },
      });
    // Counted by the worker; each scrape adds what it counted since the last one.
    for (const [name, help, read] of [
      [
        'berth_workspace_cache_hits_total',
        'Turns whose workspace copy was on the data dir',
        () => cache().hits,
      ],
      [
        'berth_workspace_cache_misses_total',
        'Turns whose workspace copy was materialised from the chain',
        () => cache().misses,
      ],
      [
        'berth_workspace_cache_evictions_total',
        'Workspace copies evicted to stay under the budget',
        () => cache().evictions,
      ],
    ] as const) {
      let counted = 0;
      new Counter({
        name,
        help,
        registers,
        collect() {
          const now = read();
          if (now > counted) this.inc(now - counted);
          counted = now;
        },
      });
    }
    new Gauge({
      name: 'berth_webhook_deliveries',
      help: 'Webhook deliveries by status (dead = dead letters)',
      labelNames: ['status'],
      registers,
      async collect() {
        for (const [status, n] of Object.entries(await store.webhookDeliveryCounts()))
          this.set({ status }, n);
      },
    });
    this.turnsStarted = new Counter({
      name: 'berth_turns_started_total',
      help: 'Turns started (attempts)',
      registers,
    });
    this.turnSeconds = new Histogram({
      name: 'berth_turn_duration_seconds',
      help: 'Turn run time, start to first reply',
      buckets: SECONDS,
      registers,
    });
    this.queueWaitSeconds = new Histogram({
      name: 'berth_queue_wait_seconds',
      help: 'Wait from a message queued to its turn started',
      buckets: SECONDS,
      registers,
    });
    this.retries = new Counter({
      name: 'berth_retries_total',
      help: 'Messages sent back for a retry',
      registers,
    });
    this.failedMessages = new Counter({
      name: 'berth_failed_messages_total',
      help: 'Messages failed after their last try (dead letters of the turn queue)',
      registers,
    });
    this.detectionSeconds = new Histogram({
      name: 'berth_detection_seconds',
      help: "From a sandbox's death mid-turn (its exit, or its last heartbeat) to its turn aborted",
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.recoverySeconds = new Histogram({
      name: 'berth_recovery_seconds',
      help: 'From a turn aborted (retrying) to the next reply of its session',
      buckets: SECONDS,
      registers,
    });
    this.storeCallSeconds = new Histogram({
      name: 'berth_store_call_seconds',
      help: 'Store transaction latency by method (commitTurn = store commit), in this process',
      labelNames: ['method'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
  }

  /**
   * The event-derived metrics follow `feed` from the first scrape on (a feed nobody scrapes
   * stays stopped); events already in the log then belong to before. Returns the way to stop.
   */
  useFeed(feed: ChangeFeed): () => void {
    this.feed = feed;
    return () => {
      this.feed = null;
      void this.following?.then((subscription) => subscription.unsubscribe());
      this.following = null;
    };
  }

  /** Brings the event-derived metrics up to date, then renders every metric. */
  async render(): Promise<string> {
    if (this.feed) {
      this.following ??= this.follow(this.feed);
      await this.following;
      await this.feed.catchUp();
    }
    return this.registry.metrics();
  }

  private async follow(feed: ChangeFeed): Promise<Subscription> {
    const from = await this.sources.store.lastEventId();
    return feed.subscribe({
      filter: { kind: 'tenant', tenant: undefined },
      deliver: (e) => {
        if (e.id > from) this.observe(e);
      },
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** One per aborted turn: its messages' events, written together (so read in a row), carry the same figure. */
  private observeDetection(e: SessionEvent): void {
    const ms = e.data.detectedAfterMs;
    const turnId = String(e.data.turnId ?? '');
    if (typeof ms !== 'number' || turnId === this.lastDetectedTurn) return;
    this.lastDetectedTurn = turnId;
    this.detectionSeconds.observe(ms / 1000);
  }

  private observe(e: SessionEvent): void {
    const turnId = String(e.data.turnId ?? '');
    switch (e.type) {
      case 'queued':
        if (!this.queuedAt.has(e.sessionId)) this.queuedAt.set(e.sessionId, e.createdAt);
        break;
      case 'started': {
        this.turnsStarted.inc();
        this.turnStartedAt.set(turnId, e.createdAt);
        const queued = this.queuedAt.get(e.sessionId);
        if (queued !== undefined) this.queueWaitSeconds.observe((e.createdAt - queued) / 1000);
        this.queuedAt.delete(e.sessionId);
        break;
      }
      case 'reply': {
        const started = this.turnStartedAt.get(turnId);
        if (started !== undefined) this.turnSeconds.observe((e.createdAt - started) / 1000);
        this.turnStartedAt.delete(turnId);
        const since = this.retryingSince.get(e.sessionId);
        if (since !== undefined) this.recoverySeconds.observe((e.createdAt - since) / 1000);
        this.retryingSince.delete(e.sessionId);
        break;
      }
      case 'retrying':
        this.observeDetection(e);
        this.retries.inc();
        this.turnStartedAt.delete(turnId);
        if (!this.retryingSince.has(e.sessionId)) this.retryingSince.set(e.sessionId, e.createdAt);
        // The retry waits in the queue again.
        this.queuedAt.set(e.sessionId, e.createdAt);
        break;
      case 'failed':
        this.observeDetection(e);
        this.failedMessages.inc();
        this.turnStartedAt.delete(turnId);
        this.retryingSince.delete(e.sessionId);
        break;
      case 'interrupted':
        this.turnStartedAt.delete(turnId);
        this.retryingSince.delete(e.sessionId);
        break;
      case 'archived':
        this.queuedAt.delete(e.sessionId);
        this.retryingSince.delete(e.sessionId);
        break;
      case 'progress':
        break;
    }
  }
}

const TIMED_METHODS = [
  'commitTurn',
  'claimRunnableSession',
  'enqueueMessage',
  'startTurn',
  'abortTurn',
] as const;

/** The store, with the latency of its main transactions observed into `histogram`. */
export function timeStoreCalls(store: Store, histogram: Histogram<'method'>): Store {
  const timed: Partial<Store> = {};
  for (const method of TIMED_METHODS) {
    const original = store[method].bind(store) as (...args: unknown[]) => Promise<unknown>;
    (timed as Record<string, unknown>)[method] = async (...args: unknown[]) => {
      const end = histogram.startTimer({ method });
      try {
        return await original(...args);
      } finally {
        end();
      }
    };
  }
  return Object.assign(Object.create(store) as Store, timed);
}
