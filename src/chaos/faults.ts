/**
 * The fault injector: faults the way they happen in production, not simulated.
 *  - sandbox-kill: every A–B seconds (uniform), `docker kill` (Engine API) of one random
 *    running container carrying this install's label.
 *  - worker-kill: once, when `due()` says so, SIGKILL of `count` worker processes at once
 *    (those running the most turns, and only workers running one, so that every kill hits
 *    work), restarted with the same argv `restartDelayMs` later.
 *  - store-restart: once, when `due()` says so, the store's database server is stopped
 *    (fast shutdown: connections cut), left down `downMs`, and started again.
 *  - store-failover: when `due(k)` says so for the k-th one, the primary of a replicated
 *    store (Patroni) dies: its postmaster SIGKILLed (Patroni lives on, fails over and brings
 *    the old primary back as a replica), or its whole machine lost (link cut, then Patroni
 *    and PostgreSQL SIGKILLed; started again once another member leads). The injector
 *    records when a new primary led and when berth first committed on it (MTTR), and
 *    waits for a synchronous standby again before the next one.
 *  - node-kill: once, when `due()` says so, `count` nodes (chaos-node.ts: worker, engine,
 *    containers, disk) die at once, those running the most turns (never an idle one), and come back empty
 *    `restartDelayMs` later (a replacement machine).
 *  - blobs-kill: once, when `due()` says so, the S3 daemon is SIGKILLed, left down
 *    `downMs`, and started again; never while a worker or node is coming back (a worker
 *    refuses to start against an S3 service that does not answer).
 *  - partition: once, when `due()` says so, the network link of the worker running the
 *    most turns (never an idle one) is cut (its namespace's veth, worker-network.ts) for `durationMs` (longer
 *    than the lease), then healed. A lease after the cut the injector looks at the
 *    sandboxes that ran that worker's turns at the cut: the worker must have killed them
 *    itself by then (self-fencing), before anyone else may take its sessions over.
 *
 * Invariants:
 * - Only containers labelled `berth.install=<installId>` of an engine the run gave are ever
 *   touched (the host's, or each live node's).
 * - Every fault is recorded with the time taken just BEFORE it was issued, so a
 *   detection time measured from it is never negative. A sandbox kill a busy engine
 *   answers late is recorded when it answers (stop() waits for it), never dropped: the
 *   turn it ended would otherwise count as an abort no fault explains.
 * - At most one worker-kill round, one node-kill round, one blobs-kill, one store-restart
 *   and one partition per injector; the restarts and the heal always happen, even when
 *   `stop()` comes first (stop waits for them), so nothing is left dead or cut off. A
 *   partitioned worker is not SIGKILLed.
 * - A worker kill or a partition that finds no worker running a turn within its wait is
 *   not injected (and not recorded as a fault: its kind shows fewer injections), rather
 *   than aimed at an idle worker where it could hit nothing.
 * - The loop ends at `stop()` or `maxDurationMs`, whichever is first, and wakes at least
 *   every TICK_MS; every Engine API and status call is bounded by a timeout.
 */
import type Dockerode from 'dockerode';
import { type Clock, LABELS, sleep, systemClock, WakeSignal } from '../core/index.js';
import type {
  Fault,
  KillableNode,
  KillableWorker,
  NodeKill,
  Partition,
  PartitionableWorker,
  RunningTurn,
  RunningTurns,
  SandboxEngine,
  WorkerKill,
} from './fault-records.js';
import {
  type BlobsOutage,
  failOver,
  killBlobs,
  type OutageContext,
  restartStore,
  type StoreFailoverOutage,
  type StoreRestartOutage,
} from './outages.js';

export interface FaultInjectorOptions {
  /** The engines whose sandboxes are killed, as they are now (a dead node has none). */
  engines(): SandboxEngine[];
  /** Interval between sandbox kills, ms, drawn uniformly from [min, max]. */
  killEveryMs: { min: number; max: number };
  /**
   * With these, every other sandbox kill aims at a sandbox running a turn (one that started
   * last, when there is one): a run's sandboxes are mostly warm or between turns, and kills
   * at random alone may all miss (8 of 8 did once). The others stay at random.
   */
  runningTurns?: RunningTurns;
  maxDurationMs: number;
  workerKill?: {
    workers: KillableWorker[];
    /** Polled every tick; once true, the kill happens as soon as `count` workers run a turn. */
    due(): boolean;
    runningTurns: RunningTurns;
    /** After due() this long, the workers that run a turn are killed, and as many fewer as do not (warned). */
    maxWaitForTurnsMs: number;
    restartDelayMs: number;
    /** How many workers are SIGKILLed at once. @default 1 */
    count?: number;
  };
  nodeKill?: {
    nodes: KillableNode[];
    /** How many nodes die at once. */
    count: number;
    /** Polled every tick; once true, the kill happens as soon as a node runs a turn. */
    due(): boolean;
    runningTurns: RunningTurns;
    /** After due() this long, kill those running a turn (fewer than count), or none. */
    maxWaitForTurnsMs: number;
    restartDelayMs: number;
  };
  blobsKill?: BlobsOutage;
  storeRestart?: StoreRestartOutage;
  storeFailover?: StoreFailoverOutage;
  partition?: {
    workers: PartitionableWorker[];
    /** Polled every tick; once true, the cut happens as soon as a worker runs a turn. */
    due(): boolean;
    runningTurns: RunningTurns;
    /** After due() this long without any running turn, no cut is made (warned). */
    maxWaitForTurnsMs: number;
    /** How long the link stays cut: longer than the lease. */
    durationMs: number;
    leaseMs: number;
  };
  random?: () => number;
  /** Where every fault's times come from: the clock the turns' times are written with. @default systemClock */
  clock?: Clock;
  /** Non-fatal trouble (a kill that raced the container's own end, an engine error). */
  onWarning?: (message: string) => void;
}

const TICK_MS = 200;
const ENGINE_TIMEOUT_MS = 5000;
/** How long the running turns are asked for (the API's status, slow on a loaded machine). */
const STATUS_TIMEOUT_MS = 20_000;
/** How long a sandbox kill's answer is waited for (in the background, past ENGINE_TIMEOUT_MS). */
const KILL_ANSWER_TIMEOUT_MS = 60_000;
/**
 * A worker kill, node kill or partition aims at a turn that started at most this long ago:
 * a turn lasts a second or so, and one found on an older status is often done by the time
 * the fault lands (it then proves nothing). Half the wait for turns is spent on such aims;
 * then any running turn will do.
 */
const FRESH_TURN_MS = 500;
/** When no sandbox is running, look again this soon instead of waiting a whole interval. */
const RETRY_NO_TARGET_MS = 250;

export class FaultInjector {
  readonly faults: Fault[] = [];
  /** Kill attempts that found no running sandbox or raced its end. */
  skipped = 0;
  /** Sandbox kills the engine has not answered yet. */
  private readonly killsUnderWay = new Set<Promise<boolean>>();
  private stopped = false;
  private readonly wake = new WakeSignal();
  private loop: Promise<void> | null = null;
  private workerKill: Promise<void> | null = null;
  private storeRestart: Promise<void> | null = null;
  /** The failover under way (or the last one); `failovers` counts those started. */
  private storeFailover: Promise<void> | null = null;
  private failovers = 0;
  private failoverSettled = true;
  private workerKillDueAt: number | null = null;
  private nodeKill: Promise<void> | null = null;
  private nodeKillDueAt: number | null = null;
  private blobsKill: Promise<void> | null = null;
  /** Workers or nodes killed and not started again yet. */
  private comingBack = 0;
  /** The S3 daemon is down: no worker or node is killed meanwhile (it could not start again). */
  private blobsDown = false;
  private partition: Promise<void> | null = null;
  private partitionDueAt: number | null = null;
  /** The worker whose link is cut right now (never SIGKILLed meanwhile). */
  private partitioned: string | null = null;
  private readonly random: () => number;
  private readonly clock: Clock;
  private readonly outageContext: OutageContext;
  /** Sandbox kills tried on a running sandbox: odd ones are aimed (runningTurns). */
  private sandboxKillsTried = 0;

  constructor(private readonly opts: FaultInjectorOptions) {
    const { min, max } = opts.killEveryMs;
    if (!(min > 0 && max >= min))
      throw new RangeError(`kill interval must be 0 < min <= max, got ${min}-${max} ms`);
    this.random = opts.random ?? Math.random;
    this.clock = opts.clock ?? systemClock;
    this.outageContext = {
      clock: this.clock,
      faults: this.faults,
      warn: (message) => this.opts.onWarning?.(message),
    };
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops injecting; resolves when the loop and a pending worker restart are done. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake.notify();
    await this.loop;
    await Promise.all(this.killsUnderWay);
    await this.workerKill;
    await this.nodeKill;
    await this.blobsKill;
    await this.storeRestart;
    await this.storeFailover;
    await this.partition;
  }

  count(kind: Fault['kind']): number {
    return this.faults.filter((f) => f.kind === kind).length;
  }

  private async run(): Promise<void> {
    const deadline = this.clock.now() + this.opts.maxDurationMs;
    let nextKillAt = this.clock.now() + this.interval();
    while (!this.stopped && this.clock.now() < deadline) {
      const wk = this.opts.workerKill;
      if (wk && !this.workerKill && !this.blobsDown && wk.due()) {
        this.workerKillDueAt ??= this.clock.now();
        const count = wk.count ?? 1;
        const waited = this.clock.now() - this.workerKillDueAt >= wk.maxWaitForTurnsMs;
        const victims = await this.pickWorkers(wk, count, this.workerKillDueAt);
        if (victims.length === count || waited) {
          if (victims.length < count)
            this.opts.onWarning?.(
              `worker kill: ${count - victims.length} of ${count} not injected: no other worker ran a turn within ${wk.maxWaitForTurnsMs} ms`,
            );
          this.workerKill = victims.length > 0 ? this.killWorkers(wk, victims) : Promise.resolve();
        }
      }
      const nk = this.opts.nodeKill;
      if (nk && !this.nodeKill && !this.blobsDown && nk.due()) {
        this.nodeKillDueAt ??= this.clock.now();
        const waited = this.clock.now() - this.nodeKillDueAt >= nk.maxWaitForTurnsMs;
        const victims = await this.busiest(nk.nodes, nk.runningTurns, nk.count, {
          dueAt: this.nodeKillDueAt,
          maxWaitMs: nk.maxWaitForTurnsMs,
        });
        if (victims.length === nk.count || waited) {
          if (victims.length < nk.count)
            this.opts.onWarning?.(
              `node kill: ${nk.count - victims.length} of ${nk.count} not injected: no other node ran a turn within ${nk.maxWaitForTurnsMs} ms`,
            );
          this.nodeKill =
            victims.length > 0
              ? this.killNodes(
                  nk,
                  victims.map((v) => v.worker),
                )
              : Promise.resolve();
        }
      }
      const bk = this.opts.blobsKill;
      if (bk && !this.blobsKill && this.comingBack === 0 && bk.due()) {
        this.blobsDown = true;
        this.blobsKill = killBlobs(bk, this.outageContext).finally(() => {
          this.blobsDown = false;
        });
      }
      const pt = this.opts.partition;
      if (pt && !this.partition && pt.due()) {
        this.partitionDueAt ??= this.clock.now();
        const [victim] = await this.busiest(pt.workers, pt.runningTurns, 1, {
          dueAt: this.partitionDueAt,
          maxWaitMs: pt.maxWaitForTurnsMs,
        });
        if (victim) this.partition = this.cutOff(pt, victim.worker, victim.sandboxes);
        else if (this.clock.now() - this.partitionDueAt >= pt.maxWaitForTurnsMs) {
          this.opts.onWarning?.(
            `partition not injected: no worker ran a turn within ${pt.maxWaitForTurnsMs} ms`,
          );
          this.partition = Promise.resolve();
        }
      }
      const sr = this.opts.storeRestart;
      if (sr && !this.storeRestart && sr.due()) this.storeRestart = restartStore(sr, this.outageContext);
      const sf = this.opts.storeFailover;
      if (sf && this.failoverSettled && this.failovers < sf.deaths.length && sf.due(this.failovers)) {
        this.failoverSettled = false;
        this.storeFailover = failOver(sf, sf.deaths[this.failovers++]!, this.outageContext).finally(() => {
          this.failoverSettled = true;
        });
      }
      if (this.clock.now() >= nextKillAt) {
        const hit = await this.killRandomSandbox().catch((err: unknown) => {
          this.opts.onWarning?.(`sandbox kill failed: ${(err as Error).message}`);
          return false;
        });
        nextKillAt = this.clock.now() + (hit ? this.interval() : RETRY_NO_TARGET_MS);
      }
      await this.wake.wait(Math.max(0, Math.min(TICK_MS, nextKillAt - this.clock.now())));
    }
  }

  private interval(): number {
    const { min, max } = this.opts.killEveryMs;
    return min + this.random() * (max - min);
  }

  /** Running sandboxes of every engine that answers (a node that just died has none to give). */
  private async runningSandboxes(): Promise<{ engine: SandboxEngine; info: Dockerode.ContainerInfo }[]> {
    const lists = await Promise.all(
      this.opts.engines().map(async (engine) => {
        const infos = await engine.docker
          .listContainers({
            filters: { label: [`${LABELS.install}=${engine.installId}`], status: ['running'] },
            abortSignal: AbortSignal.timeout(ENGINE_TIMEOUT_MS),
          } as Dockerode.ContainerListOptions)
          .catch((err: unknown) => {
            if (this.opts.engines().length === 1) throw err;
            return [];
          });
        return infos.map((info) => ({ engine, info }));
      }),
    );
    return lists.flat();
  }

  /**
   * True when a container was killed, or its kill is still under way after ENGINE_TIMEOUT_MS:
   * a busy engine may carry a kill out after any wait, so the call is not abandoned but
   * recorded when it answers (stop() waits for it); only an error or a container already
   * gone means nothing was killed.
   */
  private async killRandomSandbox(): Promise<boolean> {
    const running = await this.runningSandboxes();
    if (running.length === 0) {
      this.skipped++;
      return false;
    }
    this.sandboxKillsTried++;
    const aimed = this.sandboxKillsTried % 2 === 1 ? await this.busySandboxes() : [];
    const candidates = running.filter((c) => c.info.Names.some((n) => aimed.includes(n.replace(/^\//, ''))));
    const pool = candidates.length > 0 ? candidates : running;
    const { engine, info: target } = pool[Math.floor(this.random() * pool.length)]!;
    const at = this.clock.now();
    const answered = engine.docker
      .getContainer(target.Id)
      .kill({ abortSignal: AbortSignal.timeout(KILL_ANSWER_TIMEOUT_MS) })
      .then(
        () => {
          this.faults.push({
            kind: 'sandbox-kill',
            at,
            killedAt: this.clock.now(),
            container: (target.Names[0] ?? target.Id).replace(/^\//, ''),
            warm: LABELS.pool in target.Labels,
            workerId: target.Labels[LABELS.worker] ?? '',
          });
          return true;
        },
        (err: unknown) => {
          // 404/409: it ended on its own (turn done, supervisor killed it) between list and kill.
          const status = (err as { statusCode?: number }).statusCode;
          if (status !== 404 && status !== 409)
            this.opts.onWarning?.(`sandbox kill failed: ${(err as Error).message}`);
          this.skipped++;
          return false;
        },
      );
    this.killsUnderWay.add(answered);
    void answered.finally(() => this.killsUnderWay.delete(answered));
    return Promise.race([answered, sleep(ENGINE_TIMEOUT_MS).then(() => true)]);
  }

  /** The sandboxes of the newest running turns (the one started last, and any within FRESH_TURN_MS of it). */
  private async busySandboxes(): Promise<string[]> {
    const runningTurns = this.opts.runningTurns;
    if (!runningTurns) return [];
    const turns = [
      ...(await withTimeout(runningTurns()).catch(() => new Map<string, RunningTurn[]>())).values(),
    ].flat();
    const newest = newestStart(turns);
    return turns.filter((t) => newest - t.startedAt <= FRESH_TURN_MS).map((t) => t.sandbox);
  }

  private async killWorkers(
    wk: NonNullable<FaultInjectorOptions['workerKill']>,
    victims: KillableWorker[],
  ): Promise<void> {
    const records = victims.map(
      (victim): WorkerKill => ({
        kind: 'worker-kill',
        at: this.clock.now(),
        pid: victim.pid!,
        workerId: victim.workerId()!,
        child: victim.name,
        restartedAt: null,
        restartedPid: null,
      }),
    );
    this.comingBack += victims.length;
    await Promise.all(victims.map((v) => v.sigkill()));
    this.faults.push(...records);
    await sleep(wk.restartDelayMs);
    await Promise.all(
      victims.map(async (victim, i) => {
        try {
          await victim.restart();
          records[i]!.restartedAt = this.clock.now();
          records[i]!.restartedPid = victim.pid ?? null;
        } finally {
          this.comingBack--;
        }
      }),
    );
  }

  private async killNodes(
    nk: NonNullable<FaultInjectorOptions['nodeKill']>,
    victims: KillableNode[],
  ): Promise<void> {
    const at = this.clock.now();
    const records = victims.map(
      (victim): NodeKill => ({
        kind: 'node-kill',
        at,
        node: victim.name,
        workerId: victim.workerId()!,
        deadAt: null,
        droppedAt: null,
        restartedAt: null,
      }),
    );
    this.comingBack += victims.length;
    this.faults.push(...records);
    await Promise.all(
      victims.map(async (victim, i) => {
        try {
          await victim.kill();
          records[i]!.deadAt = this.clock.now();
          await victim.wipe();
          records[i]!.droppedAt = this.clock.now();
          await sleep(nk.restartDelayMs);
          await victim.restart();
          records[i]!.restartedAt = this.clock.now();
        } catch (err) {
          this.opts.onWarning?.(`node ${victim.name} did not come back: ${(err as Error).message}`);
        } finally {
          this.comingBack--;
        }
      }),
    );
  }

  /** Up to `count` live workers running the most turns (ties at random); only workers running one. */
  private async pickWorkers(
    wk: NonNullable<FaultInjectorOptions['workerKill']>,
    count: number,
    dueAt: number,
  ): Promise<KillableWorker[]> {
    const live = wk.workers.filter((w) => w.pid !== undefined && w.workerId() !== this.partitioned);
    return (await this.busiest(live, wk.runningTurns, count, { dueAt, maxWaitMs: wk.maxWaitForTurnsMs })).map(
      (b) => b.worker,
    );
  }

  /**
   * Up to `count` workers with a known id running the most turns (ties at random), with
   * their turns' sandboxes; a worker running none is never picked. For the first half of
   * the wait since the fault was due, only workers whose newest turn is fresh (FRESH_TURN_MS).
   */
  private async busiest<W extends { workerId(): string | null }>(
    workers: W[],
    runningTurns: RunningTurns,
    count: number,
    wait: { dueAt: number; maxWaitMs: number },
  ): Promise<{ worker: W; sandboxes: string[] }[]> {
    const turns = await withTimeout(runningTurns()).catch(() => new Map<string, RunningTurn[]>());
    const now = this.clock.now();
    const freshOnly = now - wait.dueAt < wait.maxWaitMs / 2;
    const ranked = workers
      .filter((w) => w.workerId() !== null)
      .map((worker) => ({ worker, running: turns.get(worker.workerId()!) ?? [], tie: this.random() }))
      .filter((w) => w.running.length > 0 && (!freshOnly || now - newestStart(w.running) <= FRESH_TURN_MS))
      .sort((a, b) => b.running.length - a.running.length || a.tie - b.tie);
    return ranked
      .slice(0, count)
      .map((w) => ({ worker: w.worker, sandboxes: w.running.map((t) => t.sandbox) }));
  }

  private async cutOff(
    pt: NonNullable<FaultInjectorOptions['partition']>,
    victim: PartitionableWorker,
    sandboxes: string[],
  ): Promise<void> {
    const record: Partition = {
      kind: 'partition',
      at: this.clock.now(),
      workerId: victim.workerId()!,
      child: victim.name,
      sandboxes,
      sandboxesAliveAfterLease: null,
      healedAt: null,
    };
    this.partitioned = record.workerId;
    try {
      await victim.cut();
      this.faults.push(record);
      await sleep(record.at + pt.leaseMs - this.clock.now());
      record.sandboxesAliveAfterLease = await this.stillRunning(sandboxes).catch((err: unknown) => {
        this.opts.onWarning?.(`partition: cannot list sandboxes: ${(err as Error).message}`);
        return null;
      });
      await sleep(record.at + pt.durationMs - this.clock.now());
    } finally {
      await victim.heal().then(
        () => {
          record.healedAt = this.clock.now();
        },
        (err: unknown) => this.opts.onWarning?.(`partition: link did not come up: ${(err as Error).message}`),
      );
      this.partitioned = null;
    }
  }

  /** How many of these containers are running. */
  private async stillRunning(names: string[]): Promise<number> {
    const running = new Set(
      (await this.runningSandboxes()).flatMap((c) => c.info.Names.map((n) => n.replace(/^\//, ''))),
    );
    return names.filter((n) => running.has(n)).length;
  }
}

/** The running turns, or a rejection after STATUS_TIMEOUT_MS (a store slow to answer). */
function withTimeout<T>(read: Promise<T>): Promise<T> {
  return Promise.race([
    read,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error('timeout')), STATUS_TIMEOUT_MS).unref(),
    ),
  ]);
}

/** When the newest of these turns started (-Infinity for none). */
function newestStart(turns: RunningTurn[]): number {
  return Math.max(...turns.map((t) => t.startedAt));
}
