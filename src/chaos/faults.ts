/**
 * The fault injector: faults the way they happen in production, not simulated.
 *  - sandbox-kill: every A–B seconds (uniform), `docker kill` (Engine API) of one random
 *    running container carrying this install's label.
 *  - worker-kill: once, when `due()` says so, SIGKILL of `count` worker processes at once
 *    (those running the most turns, so that the kills hit work), restarted with the same
 *    argv `restartDelayMs` later.
 *  - store-restart: once, when `due()` says so, the store's database server is stopped
 *    (fast shutdown: connections cut), left down `downMs`, and started again.
 *
 * Invariants:
 * - Only containers labelled `berth.install=<installId>` are ever touched.
 * - Every fault is recorded with the time taken just BEFORE it was issued, so a
 *   detection time measured from it is never negative.
 * - At most one worker-kill round and one store-restart per injector; the restarts always
 *   happen, even when `stop()` comes first (stop waits for them), so nothing is left dead.
 * - The loop ends at `stop()` or `maxDurationMs`, whichever is first, and wakes at least
 *   every TICK_MS; every Engine API and status call is bounded by a timeout.
 */
import type Dockerode from 'dockerode';
import { LABELS, WakeSignal } from '../core/index.js';

export interface SandboxKill {
  kind: 'sandbox-kill';
  at: number;
  /** When the kill call returned: the container is dead by then (a warm one may have started a turn since `at`). */
  killedAt: number;
  container: string;
  /** A warm sandbox, bound to no session yet (labels cannot say which session a warm one got later). */
  warm: boolean;
  workerId: string;
}

export interface WorkerKill {
  kind: 'worker-kill';
  at: number;
  pid: number;
  workerId: string;
  /** Which child ('worker-1', ...). */
  child: string;
  restartedAt: number | null;
  restartedPid: number | null;
}

export interface StoreRestart {
  kind: 'store-restart';
  /** When the stop was issued. */
  at: number;
  /** When the server accepted connections again; null if it did not come back. */
  upAt: number | null;
}

export type Fault = SandboxKill | WorkerKill | StoreRestart;

/** A worker child the injector may SIGKILL and restart (see children.ts). */
export interface KillableWorker {
  readonly name: string;
  readonly pid: number | undefined;
  /** The berth worker id of the current incarnation; null until known. */
  workerId(): string | null;
  sigkill(): Promise<void>;
  restart(): Promise<void>;
}

export interface FaultInjectorOptions {
  docker: Dockerode;
  installId: string;
  /** Interval between sandbox kills, ms, drawn uniformly from [min, max]. */
  killEveryMs: { min: number; max: number };
  maxDurationMs: number;
  workerKill?: {
    workers: KillableWorker[];
    /** Polled every tick; once true, the kill happens as soon as a worker runs a turn. */
    due(): boolean;
    /** Running turns per worker id right now (from the API's /v1/status). */
    runningTurns(): Promise<Map<string, number>>;
    /** After due() this long without any running turn, kill the busiest workers anyway (a miss). */
    maxWaitForTurnsMs: number;
    restartDelayMs: number;
    /** How many workers are SIGKILLed at once. @default 1 */
    count?: number;
  };
  storeRestart?: {
    /** Polled every tick; once true, the store is restarted. */
    due(): boolean;
    stop(): Promise<void>;
    start(): Promise<void>;
    downMs: number;
  };
  random?: () => number;
  /** Non-fatal trouble (a kill that raced the container's own end, an engine error). */
  onWarning?: (message: string) => void;
}

const TICK_MS = 200;
const ENGINE_TIMEOUT_MS = 5000;
/** When no sandbox is running, look again this soon instead of waiting a whole interval. */
const RETRY_NO_TARGET_MS = 250;

export class FaultInjector {
  readonly faults: Fault[] = [];
  /** Kill attempts that found no running sandbox or raced its end. */
  skipped = 0;
  private stopped = false;
  private readonly wake = new WakeSignal();
  private loop: Promise<void> | null = null;
  private workerKill: Promise<void> | null = null;
  private storeRestart: Promise<void> | null = null;
  private workerKillDueAt: number | null = null;
  private readonly random: () => number;

  constructor(private readonly opts: FaultInjectorOptions) {
    const { min, max } = opts.killEveryMs;
    if (!(min > 0 && max >= min))
      throw new RangeError(`kill interval must be 0 < min <= max, got ${min}-${max} ms`);
    this.random = opts.random ?? Math.random;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops injecting; resolves when the loop and a pending worker restart are done. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake.notify();
    await this.loop;
    await this.workerKill;
    await this.storeRestart;
  }

  count(kind: Fault['kind']): number {
    return this.faults.filter((f) => f.kind === kind).length;
  }

  private async run(): Promise<void> {
    const deadline = Date.now() + this.opts.maxDurationMs;
    let nextKillAt = Date.now() + this.interval();
    while (!this.stopped && Date.now() < deadline) {
      const wk = this.opts.workerKill;
      if (wk && !this.workerKill && wk.due()) {
        this.workerKillDueAt ??= Date.now();
        const force = Date.now() - this.workerKillDueAt >= wk.maxWaitForTurnsMs;
        const victims = await this.pickWorkers(wk, force);
        if (victims.length > 0) this.workerKill = this.killWorkers(wk, victims);
        else if (force) {
          this.opts.onWarning?.('worker kill skipped: no running worker with a known id');
          this.workerKill = Promise.resolve();
        }
      }
      const sr = this.opts.storeRestart;
      if (sr && !this.storeRestart && sr.due()) this.storeRestart = this.restartStore(sr);
      if (Date.now() >= nextKillAt) {
        const hit = await this.killRandomSandbox().catch((err: unknown) => {
          this.opts.onWarning?.(`sandbox kill failed: ${(err as Error).message}`);
          return false;
        });
        nextKillAt = Date.now() + (hit ? this.interval() : RETRY_NO_TARGET_MS);
      }
      await this.wake.wait(Math.max(0, Math.min(TICK_MS, nextKillAt - Date.now())));
    }
  }

  private interval(): number {
    const { min, max } = this.opts.killEveryMs;
    return min + this.random() * (max - min);
  }

  private async runningSandboxes(): Promise<Dockerode.ContainerInfo[]> {
    return this.opts.docker.listContainers({
      filters: { label: [`${LABELS.install}=${this.opts.installId}`], status: ['running'] },
      abortSignal: AbortSignal.timeout(ENGINE_TIMEOUT_MS),
    } as Dockerode.ContainerListOptions);
  }

  /** True when a container was killed. */
  private async killRandomSandbox(): Promise<boolean> {
    const running = await this.runningSandboxes();
    if (running.length === 0) {
      this.skipped++;
      return false;
    }
    const target = running[Math.floor(this.random() * running.length)]!;
    const at = Date.now();
    try {
      await this.opts.docker
        .getContainer(target.Id)
        .kill({ abortSignal: AbortSignal.timeout(ENGINE_TIMEOUT_MS) });
    } catch (err) {
      // 404/409: it ended on its own (turn done, supervisor killed it) between list and kill.
      const status = (err as { statusCode?: number }).statusCode;
      if (status !== 404 && status !== 409) throw err;
      this.skipped++;
      return false;
    }
    this.faults.push({
      kind: 'sandbox-kill',
      at,
      killedAt: Date.now(),
      container: (target.Names[0] ?? target.Id).replace(/^\//, ''),
      warm: LABELS.pool in target.Labels,
      workerId: target.Labels[LABELS.worker] ?? '',
    });
    return true;
  }

  private async killWorkers(
    wk: NonNullable<FaultInjectorOptions['workerKill']>,
    victims: KillableWorker[],
  ): Promise<void> {
    const records = victims.map(
      (victim): WorkerKill => ({
        kind: 'worker-kill',
        at: Date.now(),
        pid: victim.pid!,
        workerId: victim.workerId()!,
        child: victim.name,
        restartedAt: null,
        restartedPid: null,
      }),
    );
    await Promise.all(victims.map((v) => v.sigkill()));
    this.faults.push(...records);
    await new Promise((resolve) => setTimeout(resolve, wk.restartDelayMs));
    await Promise.all(
      victims.map(async (victim, i) => {
        await victim.restart();
        records[i]!.restartedAt = Date.now();
        records[i]!.restartedPid = victim.pid ?? null;
      }),
    );
  }

  private async restartStore(sr: NonNullable<FaultInjectorOptions['storeRestart']>): Promise<void> {
    const record: StoreRestart = { kind: 'store-restart', at: Date.now(), upAt: null };
    this.faults.push(record);
    try {
      await sr.stop();
      await new Promise((resolve) => setTimeout(resolve, sr.downMs));
    } finally {
      await sr.start().then(
        () => {
          record.upAt = Date.now();
        },
        (err: unknown) => this.opts.onWarning?.(`store did not start again: ${(err as Error).message}`),
      );
    }
  }

  /** The live workers running the most turns (ties at random); none while none runs any, unless `force`. */
  private async pickWorkers(
    wk: NonNullable<FaultInjectorOptions['workerKill']>,
    force: boolean,
  ): Promise<KillableWorker[]> {
    const turns = await Promise.race([
      wk.runningTurns(),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('timeout')), ENGINE_TIMEOUT_MS).unref(),
      ),
    ]).catch(() => new Map<string, number>());
    const load = (w: KillableWorker) => turns.get(w.workerId() ?? '') ?? 0;
    const ranked = wk.workers
      .filter((w) => w.pid !== undefined && w.workerId() !== null)
      .map((w) => ({ w, load: load(w), tie: this.random() }))
      .sort((a, b) => b.load - a.load || a.tie - b.tie);
    if (!force && (ranked[0]?.load ?? 0) === 0) return [];
    return ranked.slice(0, wk.count ?? 1).map((r) => r.w);
  }
}
