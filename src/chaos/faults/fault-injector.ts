/**
 * The fault injector: faults the way they happen in production, not simulated. One module
 * a kind says what it does and when: sandbox-kill (every A–B seconds), worker-kill,
 * node-kill, blobs-kill, store-restart and partition (once each), store-failover (once per
 * entry). This loop gives each a chance on every tick, and stops them all.
 *
 * Invariants:
 * - Every fault is recorded with the time taken just BEFORE it was issued, so a
 *   detection time measured from it is never negative.
 * - At most one worker-kill round, one node-kill round, one blobs-kill, one store-restart
 *   and one partition per injector; the restarts and the heal always happen, even when
 *   `stop()` comes first (stop waits for them), so nothing is left dead or cut off.
 * - The loop ends at `stop()` or `maxDurationMs`, whichever is first, and wakes at least
 *   every TICK_MS; every Engine API and status call is bounded by a timeout.
 */
import { type Clock, systemClock, WakeSignal } from '../../core/index.js';
import type { Fault, RunningTurns, SandboxEngine } from '../fault-records.js';
import { BlobsKillFault, type BlobsKillOptions } from './blobs-kill.js';
import type { FaultContext } from './fault-context.js';
import { NodeKillFault, type NodeKillOptions } from './node-kill.js';
import { PartitionFault, type PartitionOptions } from './partition.js';
import { SandboxKillFault } from './sandbox-kill.js';
import { StoreFailoverFault, type StoreFailoverOptions } from './store-failover.js';
import { StoreRestartFault, type StoreRestartOptions } from './store-restart.js';
import { WorkerKillFault, type WorkerKillOptions } from './worker-kill.js';

export interface FaultInjectorOptions {
  /** The engines whose sandboxes are killed, as they are now (a dead node has none). */
  engines(): SandboxEngine[];
  /** Interval between sandbox kills, ms, drawn uniformly from [min, max]. */
  killEveryMs: { min: number; max: number };
  /** With these, every other sandbox kill aims at a sandbox running a turn (sandbox-kill.ts). */
  runningTurns?: RunningTurns;
  /** The long sessions whose turn is midway now: each one's is killed once (sandbox-kill.ts). */
  longTurnsDue?: () => string[];
  maxDurationMs: number;
  workerKill?: WorkerKillOptions;
  nodeKill?: NodeKillOptions;
  blobsKill?: BlobsKillOptions;
  storeRestart?: StoreRestartOptions;
  storeFailover?: StoreFailoverOptions;
  partition?: PartitionOptions;
  random?: () => number;
  /** Where every fault's times come from: the clock the turns' times are written with. @default systemClock */
  clock?: Clock;
  /** Non-fatal trouble (a kill that raced the container's own end, an engine error). */
  onWarning?: (message: string) => void;
}

const TICK_MS = 200;

export class FaultInjector {
  readonly faults: Fault[] = [];
  private readonly ctx: FaultContext;
  private readonly sandboxKills: SandboxKillFault;
  private readonly workerKill?: WorkerKillFault;
  private readonly nodeKill?: NodeKillFault;
  private readonly blobsKill?: BlobsKillFault;
  private readonly partition?: PartitionFault;
  private readonly storeRestart?: StoreRestartFault;
  private readonly storeFailover?: StoreFailoverFault;
  private stopped = false;
  private readonly wake = new WakeSignal();
  private loop: Promise<void> | null = null;

  constructor(private readonly opts: FaultInjectorOptions) {
    const ctx: FaultContext = {
      clock: opts.clock ?? systemClock,
      random: opts.random ?? Math.random,
      faults: this.faults,
      engines: () => opts.engines(),
      warn: (message) => opts.onWarning?.(message),
      comingBack: 0,
      blobsDown: false,
      partitioned: null,
    };
    this.ctx = ctx;
    this.sandboxKills = new SandboxKillFault(opts, ctx);
    if (opts.workerKill) this.workerKill = new WorkerKillFault(opts.workerKill, ctx);
    if (opts.nodeKill) this.nodeKill = new NodeKillFault(opts.nodeKill, ctx);
    if (opts.blobsKill) this.blobsKill = new BlobsKillFault(opts.blobsKill, ctx);
    if (opts.partition) this.partition = new PartitionFault(opts.partition, ctx);
    if (opts.storeRestart) this.storeRestart = new StoreRestartFault(opts.storeRestart, ctx);
    if (opts.storeFailover) this.storeFailover = new StoreFailoverFault(opts.storeFailover, ctx);
  }

  /** Kill attempts that found no running sandbox or raced its end. */
  get skipped(): number {
    return this.sandboxKills.skipped;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops injecting; resolves when the loop and every restart, heal and failover under way are done. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake.notify();
    await this.loop;
    await this.sandboxKills.settled();
    await this.workerKill?.settled();
    await this.nodeKill?.settled();
    await this.blobsKill?.settled();
    await this.storeRestart?.settled();
    await this.storeFailover?.settled();
    await this.partition?.settled();
  }

  count(kind: Fault['kind']): number {
    return this.faults.filter((f) => f.kind === kind).length;
  }

  private async run(): Promise<void> {
    const { clock } = this.ctx;
    const deadline = clock.now() + this.opts.maxDurationMs;
    this.sandboxKills.schedule();
    while (!this.stopped && clock.now() < deadline) {
      await this.workerKill?.tick();
      await this.nodeKill?.tick();
      await this.blobsKill?.tick();
      await this.partition?.tick();
      await this.storeRestart?.tick();
      await this.storeFailover?.tick();
      await this.sandboxKills.tick();
      await this.wake.wait(Math.max(0, Math.min(TICK_MS, this.sandboxKills.dueInMs())));
    }
  }
}
