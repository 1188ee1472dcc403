/**
 * One change feed per API process: a single reader follows the event log and fans events
 * out in memory to every open SSE stream, so the store reads of the API do not grow with
 * the number of streams. Invariants:
 *
 * - One read at a time. A read is due at every store notification (`onChange`: this
 *   process's commits at once, other processes' through the SQLite relay or PostgreSQL
 *   LISTEN/NOTIFY) and on every tick (`tickMs`), the floor when a notification is lost.
 *   Notifications that arrive during a read make one more read, not one each.
 * - Ids are allocated at insert but transactions commit in another order (PostgreSQL: the
 *   transaction holding id 101 may commit after the one holding 102). The feed never moves
 *   past an id it has not seen: `settled` is the highest id below which every id was
 *   delivered or given up; an id missing below the highest seen is a gap, re-read on every
 *   read until it appears or `gapWaitMs` passed since it was first missed (then it is an
 *   id of a rolled-back transaction, or a sequence that jumped: given up, logged).
 * - Each event reaches each subscriber at most once. A session subscriber gets its
 *   session's events as soon as they are read: a session's transitions hold its row lock,
 *   so its events commit in id order and cannot fill a gap behind one already delivered.
 *   A tenant subscriber (several sessions) gets events strictly in id order, held behind a
 *   gap until it settles, so a Last-Event-ID it reports loses and repeats nothing.
 * - `subscribe` returns the settled id at that instant: a stream catches up from the store
 *   to it (tenant) or past it (session), and the feed gives it everything after.
 * - Queue positions are read once per tick for every watched session (one read, whatever
 *   the number of streams), and only while a session stream is open.
 * - Delivery is handed out in slices of DELIVERY_SLICE, with the event loop free between
 *   them: a read that finds events for thousands of streams never holds a POST or a status
 *   request behind all of them. Order is kept: one queue, drained front to back. The next
 *   read waits for the queue to drain, so the busier the fan-out, the more events one read
 *   (and one write per stream) carries.
 * - Nothing runs while nobody listens: the first subscriber starts the feed a little below
 *   the log's newest id (START_LOOKBACK_IDS), the last one to leave stops it (its store
 *   listener and timer go with it).
 */
import type { Clock, LoggedEvent } from '../core/index.js';
import type { ApiStore } from '../store/index.js';

/** The part of the API's store the feed reads. */
export type FeedStore = Pick<ApiStore, 'onChange' | 'eventLog' | 'lastEventId' | 'queuePositions'>;

export interface FeedOptions {
  /** Read at least this often, whatever the notifications. @default 1000 (ms) */
  tickMs: number;
  /** How long an id missing below the newest seen one is waited for before it is given up. @default 5000 (ms) */
  gapWaitMs: number;
  /** Rows per read of the log. @default 500 */
  batch: number;
}

/**
 * A jump of ids longer than this (a sequence moved by hand, a restore) is not waited for id
 * by id; PostgreSQL's own jumps (a crash loses at most 32 cached values) are.
 */
const MAX_GAP_IDS = 1_000;

/**
 * How far below the log's newest id a feed starts. A transaction that allocated an id
 * before the newest committed one and commits after the feed started is found as a gap,
 * if it lies within this distance. The cost: a rolled-back id that old makes the first
 * tenant stream wait `gapWaitMs` once, at the start.
 */
const START_LOOKBACK_IDS = 256;

/** Deliveries handed out before the feed lets the event loop serve other requests. */
const DELIVERY_SLICE = 256;

export const DEFAULT_FEED_OPTIONS: FeedOptions = { tickMs: 1_000, gapWaitMs: 5_000, batch: 500 };

/** One stream's interest: a session's events, or a tenant's (undefined: every tenant's, the admin). */
export type FeedFilter =
  | { kind: 'session'; sessionId: string }
  | { kind: 'tenant'; tenant: string | undefined };

export interface FeedSubscriber {
  filter: FeedFilter;
  /** An event it wants, once; in id order for a tenant subscriber. */
  deliver(event: LoggedEvent): void;
  /** Its session's queue position, as read on the tick (session subscribers; null = not queued). */
  position?(position: number | null): void;
}

interface FeedLog {
  warn(fields: object, message: string): void;
}

/** A subscription: the id settled when it began (catch up from the store to it), and its end. */
export interface Subscription {
  settled: number;
  unsubscribe(): void;
}

export class ChangeFeed {
  private readonly options: FeedOptions;
  private readonly bySession = new Map<string, Set<FeedSubscriber>>();
  private readonly tenantSubs = new Set<FeedSubscriber>();
  private subscribers = 0;
  /** Starting (reading the newest id), running, or null: stopped. */
  private started: Promise<void> | null = null;
  /** Bumped at every start and stop: a read begun under another epoch is dropped. */
  private epoch = 0;
  private settled = 0;
  private newest = 0;
  /** Events read above `settled`, not yet delivered to tenant subscribers. */
  private readonly held = new Map<number, LoggedEvent>();
  /** Ids missing above `settled` and below `newest`: when each was first missed. */
  private readonly gaps = new Map<number, number>();
  private reading = false;
  /** The read running now, if any. */
  private pumping: Promise<void> | null = null;
  private scheduled = false;
  private again = false;
  private readingPositions = false;
  /**
   * Events read, not yet handed out, and to whom: their session's subscribers or the tenant
   * subscribers, as they are when handed out (one that joined meanwhile drops by id what its
   * catch-up read; copying the sets per event would cost more than the fan-out).
   */
  private outbound: { event: LoggedEvent; to: 'session' | 'tenant' }[] = [];
  /** The drain of `outbound`: the last one started, and whether it still runs. */
  private delivering: Promise<void> = Promise.resolve();
  private draining = false;
  private offChange: (() => void) | null = null;
  private tick: NodeJS.Timeout | null = null;
  /** Store reads made by the feed, by kind (metrics, tests). */
  readonly reads = { log: 0, positions: 0 };

  constructor(
    private readonly store: FeedStore,
    private readonly clock: Clock,
    private readonly log: FeedLog,
    options: Partial<FeedOptions> = {},
  ) {
    this.options = { ...DEFAULT_FEED_OPTIONS, ...options };
  }

  /** Adds a subscriber (starting the feed if it is the first); resolves once the feed runs. */
  async subscribe(sub: FeedSubscriber): Promise<Subscription> {
    this.subscribers++;
    try {
      this.started ??= this.start();
      await this.started;
    } catch (err) {
      this.subscribers--;
      if (this.subscribers === 0) this.stop();
      throw err;
    }
    if (sub.filter.kind === 'session') {
      const set = this.bySession.get(sub.filter.sessionId) ?? new Set<FeedSubscriber>();
      this.bySession.set(sub.filter.sessionId, set.add(sub));
    } else this.tenantSubs.add(sub);
    let gone = false;
    return {
      settled: this.settled,
      unsubscribe: () => {
        if (gone) return;
        gone = true;
        if (sub.filter.kind === 'session') {
          const set = this.bySession.get(sub.filter.sessionId);
          set?.delete(sub);
          if (set?.size === 0) this.bySession.delete(sub.filter.sessionId);
        } else this.tenantSubs.delete(sub);
        this.subscribers--;
        if (this.subscribers === 0) this.stop();
      },
    };
  }

  /** Stops reading; subscribers are the routes', they end their own streams. */
  stop(): void {
    this.epoch++;
    this.started = null;
    this.offChange?.();
    this.offChange = null;
    if (this.tick) clearInterval(this.tick);
    this.tick = null;
    this.held.clear();
    this.gaps.clear();
    this.outbound = [];
  }

  /** The highest id below which every id was delivered or given up (tests, diagnostics). */
  get settledId(): number {
    return this.settled;
  }

  private async start(): Promise<void> {
    const epoch = ++this.epoch;
    const newest = await this.store.lastEventId();
    if (epoch !== this.epoch) return;
    // The newest committed id may sit above ids still being committed: start below it, so
    // the first read finds those as gaps instead of stepping over them.
    this.settled = Math.max(0, newest - START_LOOKBACK_IDS);
    this.newest = this.settled;
    // A channel's outbox changes no session's events.
    this.offChange = this.store.onChange((change) => change.type !== 'channel-outbox' && this.wake());
    this.tick = setInterval(() => {
      this.wake();
      void this.readPositions();
    }, this.options.tickMs);
    // The server keeps the process alive, not its feed (the metrics follow it for the app's life).
    this.tick.unref();
    this.wake();
  }

  private wake(): void {
    if (this.reading) {
      this.again = true;
      return;
    }
    // A commit notifies once per change, synchronously: one read for all of them.
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.reading) this.again = true;
      else this.pumping = this.pump();
    });
  }

  /**
   * Resolves once a read that began after this call has delivered what it found: the
   * metrics call it before a scrape, so a scrape counts every event committed before it.
   */
  async catchUp(): Promise<void> {
    if (!this.started) return;
    await this.started;
    while (this.pumping) await this.pumping;
    this.pumping = this.pump();
    await this.pumping;
    while (this.draining) await this.delivering;
  }

  private async pump(): Promise<void> {
    this.reading = true;
    const epoch = this.epoch;
    try {
      do {
        // The next read waits until the last one's events are handed out: under a heavy
        // fan-out, events gather meanwhile and the next read takes them together, so each
        // stream gets them in one write; a light one never waits.
        while (this.draining) await this.delivering;
        this.again = false;
        await this.readOnce(epoch);
      } while (this.again && epoch === this.epoch);
    } catch (err) {
      this.log.warn({ err }, 'Change feed read failed');
    } finally {
      this.reading = false;
      this.pumping = null;
    }
  }

  private async readOnce(epoch: number): Promise<void> {
    const { batch } = this.options;
    // Gaps first: an event committed late below ids already seen.
    if (this.gaps.size > 0) {
      const upTo = Math.max(...this.gaps.keys());
      let after = this.settled;
      for (;;) {
        this.reads.log++;
        const rows = await this.store.eventLog(after, upTo, batch);
        if (epoch !== this.epoch) return;
        for (const e of rows) if (this.gaps.delete(e.id)) this.accept(e);
        if (rows.length < batch) break;
        after = rows[rows.length - 1]!.id;
      }
    }
    for (;;) {
      this.reads.log++;
      const rows = await this.store.eventLog(this.newest, Number.MAX_SAFE_INTEGER, batch);
      if (epoch !== this.epoch) return;
      const now = this.clock.now();
      for (const e of rows) {
        if (e.id - this.newest <= MAX_GAP_IDS)
          for (let id = this.newest + 1; id < e.id; id++) this.gaps.set(id, now);
        else this.log.warn({ from: this.newest, to: e.id }, 'Change feed skipped a jump of event ids');
        this.newest = e.id;
        this.accept(e);
      }
      if (rows.length < batch) break;
    }
    this.settle();
  }

  /** A newly read event: to its session's subscribers now, to tenant subscribers once settled. */
  private accept(e: LoggedEvent): void {
    if (this.bySession.has(e.sessionId)) this.handOut(e, 'session');
    this.held.set(e.id, e);
  }

  private handOut(event: LoggedEvent, to: 'session' | 'tenant'): void {
    this.outbound.push({ event, to });
    // A drain with nothing to yield for ends before its promise is stored: the flag says
    // whether one runs, not the promise.
    if (!this.draining) this.delivering = this.deliver();
  }

  private async deliver(): Promise<void> {
    this.draining = true;
    try {
      const epoch = this.epoch;
      let handed = 0;
      // Taken a batch at a time (what arrives meanwhile waits for the next): shift() would
      // move the whole queue once per event.
      for (let batch = this.outbound; batch.length > 0; batch = this.outbound) {
        this.outbound = [];
        for (const { event, to } of batch) {
          if (to === 'session') {
            for (const sub of this.bySession.get(event.sessionId) ?? []) {
              sub.deliver(event);
              handed++;
            }
          } else
            for (const sub of this.tenantSubs) {
              const { tenant } = sub.filter as { tenant: string | undefined };
              if (tenant !== undefined && tenant !== event.tenant) continue;
              sub.deliver(event);
              handed++;
            }
          if (handed >= DELIVERY_SLICE) {
            handed = 0;
            await new Promise((resolve) => setImmediate(resolve));
            // Stopped meanwhile: what is left of the batch goes nowhere, as the queue does.
            if (this.epoch !== epoch) return;
          }
        }
      }
    } finally {
      this.draining = false;
    }
  }

  /** Moves `settled` over every id delivered or given up, delivering to tenant subscribers in id order. */
  private settle(): void {
    const now = this.clock.now();
    for (;;) {
      const next = this.settled + 1;
      if (next > this.newest) return;
      const event = this.held.get(next);
      if (event) {
        this.held.delete(next);
        if (this.tenantSubs.size > 0) this.handOut(event, 'tenant');
      } else {
        const missedAt = this.gaps.get(next);
        if (missedAt === undefined) {
          // Neither read nor a gap: inside a jump too long to wait for id by id; go to its end.
          this.settled = Math.min(this.newest, ...this.held.keys(), ...this.gaps.keys()) - 1;
          continue;
        }
        if (now - missedAt < this.options.gapWaitMs) return;
        this.gaps.delete(next);
        this.log.warn({ eventId: next, waitedMs: now - missedAt }, 'Change feed gave up a missing event id');
      }
      this.settled = next;
    }
  }

  /** Every watched session's queue position, in one read. */
  private async readPositions(): Promise<void> {
    if (this.bySession.size === 0 || this.readingPositions) return;
    this.readingPositions = true;
    const epoch = this.epoch;
    try {
      this.reads.positions++;
      const positions = await this.store.queuePositions(this.clock.now());
      if (epoch !== this.epoch) return;
      for (const [sessionId, subs] of this.bySession) {
        const position = positions.get(sessionId) ?? null;
        for (const sub of subs) sub.position?.(position);
      }
    } catch (err) {
      this.log.warn({ err }, 'Change feed could not read queue positions');
    } finally {
      this.readingPositions = false;
    }
  }
}
