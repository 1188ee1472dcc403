/**
 * A load generator for the store: simulated workers doing what berth's workers do, at their
 * rates, through the real Store methods (no SQL of its own), spread over a few Stores (a
 * bounded number of connections). Used by the scale benchmark (store-scale.ts) and, reduced,
 * by test/store-scale.postgres.test.ts, which checks what it records.
 *
 * - A worker renews its row every leaseMs / 5 (after a sleep of that long), and starts a
 *   sweep (reclaimExpiredLeases) unless its last one is still running: worker.ts's renew
 *   loop. A killed worker stops doing anything: it neither renews, nor sweeps, nor finishes
 *   its turns.
 * - A slot claims (claimRunnableSession) when it is free, runs the session's turn (startTurn,
 *   a hold, commitTurn, releaseSession), then posts the session's next message
 *   (enqueueMessage), so the queue keeps its length; with nothing to claim it waits leaseMs / 5
 *   (the claim loop's polling floor).
 */
import { setMaxListeners } from 'node:events';
import { agentSpecSchema, sleep } from '../src/core/index.js';
import type { Store } from '../src/store/index.js';

/** What the load saw, for the test's checks and the benchmark's figures. */
export interface LoadLog {
  /** Each claim: who, which session, its generation, the store time it was asked at. */
  claims: { workerId: string; sessionId: string; generation: number; at: number }[];
  /** Each session given back by a slot (release ok), in order. */
  releases: { workerId: string; sessionId: string; generation: number; at: number }[];
  /** What each sweep returned, with its worker and time. */
  reclaims: { workerId: string; sessionIds: string[]; at: number; ms: number }[];
  /** The store time of each worker's last renewal that found its row. */
  renewedAt: Map<string, number>;
  /** Renewals that found no row, fenced calls of a live worker that came back stale: none may happen. */
  lostRenewals: string[];
  staleCalls: { workerId: string; sessionId: string; call: string; code: string }[];
  /** Latencies of each Store call, ms. */
  latencies: Map<string, number[]>;
  /** Local time between a worker's successive renewals, ms. */
  renewIntervals: number[];
  errors: string[];
}

export function newLoadLog(): LoadLog {
  return {
    claims: [],
    releases: [],
    reclaims: [],
    renewedAt: new Map(),
    lostRenewals: [],
    staleCalls: [],
    latencies: new Map(),
    renewIntervals: [],
    errors: [],
  };
}

export interface FleetOptions {
  /** The worker ids; worker i calls through stores[i % stores.length]. */
  workerIds: string[];
  stores: Store[];
  leaseMs: number;
  log: LoadLog;
}

/** Times a call into log.latencies[name]; an error is logged and returns undefined. */
async function timed<T>(log: LoadLog, name: string, call: () => Promise<T>): Promise<T | undefined> {
  const t0 = performance.now();
  try {
    return await call();
  } catch (err) {
    log.errors.push(`${name}: ${(err as Error).message}`);
    return undefined;
  } finally {
    const samples = log.latencies.get(name) ?? [];
    samples.push(performance.now() - t0);
    log.latencies.set(name, samples);
  }
}

/** Registers the workers (registerWorker, `parallel` at a time), each with `slots`. */
export async function registerWorkers(stores: Store[], workerIds: string[], slots: number, parallel = 32) {
  let next = 0;
  const one = async () => {
    for (let i = next++; i < workerIds.length; i = next++) {
      const store = stores[i % stores.length]!;
      const now = store.clock.now();
      await store.registerWorker({
        id: workerIds[i]!,
        host: 'bench',
        pid: i,
        slots,
        heartbeatAt: now,
        startedAt: now,
      });
    }
  };
  await Promise.all(Array.from({ length: parallel }, one));
}

export async function createBenchAgent(store: Store, name: string): Promise<void> {
  await store.createAgent(agentSpecSchema.parse({ name, provider: 'command' }), store.clock.now());
}

export class Fleet {
  /** Where calls are recorded; a benchmark swaps it between phases. */
  log: LoadLog;
  private readonly killed = new Set<string>();
  private readonly abort = new AbortController();
  private claiming = true;
  private readonly loops: Promise<void>[] = [];
  private readonly stores = new Map<string, Store>();

  constructor(private readonly options: FleetOptions) {
    this.log = options.log;
    // Every loop sleeps on it.
    setMaxListeners(0, this.abort.signal);
    options.workerIds.forEach((id, i) => {
      this.stores.set(id, options.stores[i % options.stores.length]!);
    });
  }

  storeOf(workerId: string): Store {
    return this.stores.get(workerId)!;
  }

  isAlive(workerId: string): boolean {
    return !this.killed.has(workerId) && !this.abort.signal.aborted;
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Every worker's renew loop, each started at a random phase of its period. */
  start(): void {
    for (const id of this.options.workerIds)
      this.loops.push(this.renewLoop(id, this.storeOf(id), Math.random() * (this.options.leaseMs / 5)));
  }

  /** The worker stops renewing, sweeping and finishing turns, as if SIGKILLed. */
  kill(workerId: string): void {
    this.killed.add(workerId);
  }

  /** Slots claim nothing more; the turns they run finish (slot() then returns). */
  stopClaiming(): void {
    this.claiming = false;
  }

  /** Renewals and sweeps stop (and turns still held are left where they are). */
  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.all(this.loops);
  }

  private async renewLoop(workerId: string, store: Store, phaseMs: number): Promise<void> {
    const { leaseMs } = this.options;
    await sleep(phaseMs, this.abort.signal);
    let last = performance.now();
    let sweeping: Promise<void> | null = null;
    while (this.isAlive(workerId)) {
      await sleep(leaseMs / 5, this.abort.signal);
      if (!this.isAlive(workerId)) break;
      const now = store.clock.now();
      const renewed = await timed(this.log, 'renewWorker', () => store.renewWorker(workerId, now));
      // Recorded even if it was killed meanwhile: the row was renewed.
      if (renewed === true) this.log.renewedAt.set(workerId, now);
      if (!this.isAlive(workerId)) break;
      if (renewed === true) {
        this.log.renewIntervals.push(performance.now() - last);
        last = performance.now();
      } else if (renewed === false) this.log.lostRenewals.push(workerId);
      // As the worker does: one sweep at a time, not holding up the next renewal.
      sweeping ??= this.sweep(workerId, store).finally(() => {
        sweeping = null;
      });
    }
    await sweeping;
  }

  private async sweep(workerId: string, store: Store): Promise<void> {
    const at = store.clock.now();
    const t0 = performance.now();
    const swept = await timed(this.log, 'reclaimExpiredLeases', () => store.reclaimExpiredLeases(at));
    if (swept && swept.length > 0)
      this.log.reclaims.push({ workerId, sessionIds: swept, at, ms: performance.now() - t0 });
  }

  /**
   * One free slot's work: claim as `workerId`, run the turn (held `holdMs`), give the session
   * back and post its next message. false when there was nothing to claim.
   */
  async turn(workerId: string, holdMs: number, agent: string): Promise<boolean> {
    const log = this.log;
    const store = this.storeOf(workerId);
    const claimedAt = store.clock.now();
    const claim = await timed(log, 'claimRunnableSession', () =>
      store.claimRunnableSession(workerId, claimedAt),
    );
    if (!claim) return false;
    const sessionId = claim.session.id;
    const fence = { sessionId, generation: claim.session.generation, workerId };
    log.claims.push({ workerId, sessionId, generation: fence.generation, at: claimedAt });
    const stale = (call: string, code: string | undefined) => {
      if (code === 'ok' || code === undefined || !this.isAlive(workerId)) return false;
      log.staleCalls.push({ workerId, sessionId, call, code });
      return true;
    };
    const started = await timed(log, 'startTurn', () => store.startTurn(fence, store.clock.now()));
    if (!this.isAlive(workerId) || stale('startTurn', started?.code)) return true;
    const turn = started?.code === 'ok' ? started.value?.turn : undefined;
    if (holdMs > 0) await sleep(holdMs, this.abort.signal);
    if (!this.isAlive(workerId)) return true;
    if (turn) {
      const input = { ...fence, turnId: turn.id, outputs: [{ text: 'done' }] };
      const committed = await timed(log, 'commitTurn', () => store.commitTurn(input, store.clock.now()));
      if (stale('commitTurn', committed)) return true;
    }
    if (!this.isAlive(workerId)) return true;
    const releasedAt = store.clock.now();
    const released = await timed(log, 'releaseSession', () => store.releaseSession(fence, releasedAt));
    if (stale('releaseSession', released)) return true;
    if (released === 'ok') log.releases.push({ ...fence, at: releasedAt });
    await timed(log, 'enqueueMessage', () =>
      store.enqueueMessage({ sessionId, agent, text: 'next', now: store.clock.now() }),
    );
    return true;
  }

  /** A slot of `workerId` until claiming stops or the worker is killed: claim, hold, give back. */
  async slot(workerId: string, agent: string, holdMs: () => number): Promise<void> {
    const { leaseMs } = this.options;
    while (this.claiming && this.isAlive(workerId)) {
      if (!(await this.turn(workerId, holdMs(), agent))) await sleep(leaseMs / 5, this.abort.signal);
    }
  }
}
