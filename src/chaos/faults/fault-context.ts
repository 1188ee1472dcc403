/**
 * What the fault kinds share: the injector's context (its clock and chance, the faults
 * recorded, warnings, and the flags one kind sets for the others), how a fault finds its
 * targets (the running sandboxes, the workers running the most turns), and taking a
 * service down and up again.
 *
 * Invariants:
 * - Every Engine API and status call made here is bounded by a timeout.
 * - Each flag of the context has one writer, the kind named on it; the others only read it.
 */
import type Dockerode from 'dockerode';
import { type Clock, LABELS, sleep } from '../../core/index.js';
import type {
  BlobsKill,
  Fault,
  RunningTurn,
  RunningTurns,
  SandboxEngine,
  StoreRestart,
} from '../fault-records.js';

export interface FaultContext {
  readonly clock: Clock;
  readonly random: () => number;
  /** Every fault injected; a fault is recorded with the time taken just before it was issued. */
  readonly faults: Fault[];
  /** The engines whose sandboxes are killed, as they are now (a dead node has none). */
  engines(): SandboxEngine[];
  /** Non-fatal trouble (a kill that raced the container's own end, an engine error). */
  warn(message: string): void;
  /** Workers or nodes killed and not started again yet (written by the worker and node kills). */
  comingBack: number;
  /** The S3 daemon is down: no worker or node is killed meanwhile, it could not start again (blobs kill). */
  blobsDown: boolean;
  /** The worker whose link is cut right now, never SIGKILLed meanwhile (partition). */
  partitioned: string | null;
}

/**
 * A fault the injector's loop offers a start on every tick: `tick()` starts it once it is
 * due (without waiting for it to end), and `fault` is the one started, which `settled()`
 * waits for.
 */
export abstract class ScheduledFault<Options> {
  protected fault: Promise<void> | null = null;

  constructor(
    protected readonly opts: Options,
    protected readonly ctx: FaultContext,
  ) {}

  abstract tick(): Promise<void>;

  /** Resolves once the fault started last is over: its restart, heal or recovery done. */
  async settled(): Promise<void> {
    await this.fault;
  }
}

/** What a fault aimed at the workers (or nodes) running the most turns is given. */
export interface AimedFaultOptions {
  /** Polled every tick; once true, the fault happens as soon as its targets run a turn. */
  due(): boolean;
  runningTurns: RunningTurns;
  /** After due() this long, the fault hits those that run a turn, fewer than asked for or none (warned). */
  maxWaitForTurnsMs: number;
}

/** A scheduled fault aimed at the busiest workers or nodes, which it waits for from when it was first due. */
export abstract class AimedFault<Options extends AimedFaultOptions> extends ScheduledFault<Options> {
  protected dueAt: number | null = null;

  /** Up to `count` of these running the most turns (busiest), fresh ones only for the first half of the wait. */
  protected aim<W extends { workerId(): string | null }>(targets: W[], count: number, dueAt: number) {
    return busiest(this.ctx, targets, this.opts.runningTurns, count, {
      dueAt,
      maxWaitMs: this.opts.maxWaitForTurnsMs,
    });
  }
}

/** How long an Engine API call may take before the injector gives up on it. */
export const ENGINE_TIMEOUT_MS = 5000;
/** How long the running turns are asked for (the API's status, slow on a loaded machine). */
const STATUS_TIMEOUT_MS = 20_000;
/**
 * A worker kill, node kill or partition aims at a turn that started at most this long ago:
 * a turn lasts a second or so, and one found on an older status is often done by the time
 * the fault lands (it then proves nothing). Half the wait for turns is spent on such aims;
 * then any running turn will do. A sandbox kill aims at the newest turns within it.
 */
export const FRESH_TURN_MS = 500;

/** Running sandboxes of every engine that answers (a node that just died has none to give). */
export async function runningSandboxes(
  ctx: FaultContext,
): Promise<{ engine: SandboxEngine; info: Dockerode.ContainerInfo }[]> {
  const lists = await Promise.all(
    ctx.engines().map(async (engine) => {
      const infos = await engine.docker
        .listContainers({
          filters: { label: [`${LABELS.install}=${engine.installId}`], status: ['running'] },
          abortSignal: AbortSignal.timeout(ENGINE_TIMEOUT_MS),
        } as Dockerode.ContainerListOptions)
        .catch((err: unknown) => {
          if (ctx.engines().length === 1) throw err;
          return [];
        });
      return infos.map((info) => ({ engine, info }));
    }),
  );
  return lists.flat();
}

/** The running turns, or none when the store does not answer within STATUS_TIMEOUT_MS. */
export function runningTurnsOrNone(runningTurns: RunningTurns): Promise<Map<string, RunningTurn[]>> {
  return Promise.race([
    runningTurns(),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error('timeout')), STATUS_TIMEOUT_MS).unref(),
    ),
  ]).catch(() => new Map<string, RunningTurn[]>());
}

/** When the newest of these turns started (-Infinity for none). */
export function newestStart(turns: RunningTurn[]): number {
  return Math.max(...turns.map((t) => t.startedAt));
}

/**
 * Up to `count` workers with a known id running the most turns (ties at random), with
 * their turns' sandboxes; a worker running none is never picked. For the first half of
 * the wait since the fault was due, only workers whose newest turn is fresh (FRESH_TURN_MS).
 */
export async function busiest<W extends { workerId(): string | null }>(
  ctx: FaultContext,
  workers: W[],
  runningTurns: RunningTurns,
  count: number,
  wait: { dueAt: number; maxWaitMs: number },
): Promise<{ worker: W; sandboxes: string[] }[]> {
  const turns = await runningTurnsOrNone(runningTurns);
  const now = ctx.clock.now();
  const freshOnly = now - wait.dueAt < wait.maxWaitMs / 2;
  const ranked = workers
    .filter((w) => w.workerId() !== null)
    .map((worker) => ({ worker, running: turns.get(worker.workerId()!) ?? [], tie: ctx.random() }))
    .filter((w) => w.running.length > 0 && (!freshOnly || now - newestStart(w.running) <= FRESH_TURN_MS))
    .sort((a, b) => b.running.length - a.running.length || a.tie - b.tie);
  return ranked
    .slice(0, count)
    .map((w) => ({ worker: w.worker, sandboxes: w.running.map((t) => t.sandbox) }));
}

/** Records the outage, takes the service down for `downMs`, and always brings it up again (`upAt`: when it answered). */
export async function downAndUp(
  ctx: FaultContext,
  o: {
    kind: (BlobsKill | StoreRestart)['kind'];
    down(): Promise<void>;
    up(): Promise<void>;
    downMs: number;
    /** What did not start again, for the warning. */
    notUp: string;
  },
): Promise<void> {
  const record: BlobsKill | StoreRestart = { kind: o.kind, at: ctx.clock.now(), upAt: null };
  ctx.faults.push(record);
  try {
    await o.down();
    await sleep(o.downMs);
  } finally {
    await o.up().then(
      () => {
        record.upAt = ctx.clock.now();
      },
      (err: unknown) => ctx.warn(`${o.notUp} did not start again: ${(err as Error).message}`),
    );
  }
}
