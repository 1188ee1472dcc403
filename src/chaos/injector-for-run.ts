/**
 * The fault injector of one chaos run, wired to its processes: the workers it may SIGKILL
 * (and restart), the nodes it may kill, the links it may cut, the S3 daemon, the store's
 * database or replicated cluster. Each fault is due when a share of the turns is done: a
 * partition at a quarter, worker and node kills at a third, the store restart and the S3
 * kill at half, the k-th of n failovers at k/(n+1).
 *
 * Invariant: a worker's id is that of its current incarnation (by its pid), or null until
 * the incarnation registered; a restarted one learns it in the background (`restarts`).
 */
import type Dockerode from 'dockerode';
import type { Store } from '../store/index.js';
import type { ChaosOptions } from './chaos-options.js';
import { type BerthProcess, workerIdOf } from './children.js';
import { type KillableWorker, type PrimaryDeath, runningTurnsIn } from './fault-records.js';
import { FaultInjector } from './faults/index.js';
import { BLOBS_KILL_CALL, KILL_CALL } from './long-turns.js';
import type { NodeSet } from './node-set.js';
import type { RequestRecord } from './session-driver.js';
import { firstCommitAfter } from './store-failover.js';
import type { WorkerNetwork } from './worker-network.js';

/** What of the run the faults reach. */
export interface RunTargets {
  opts: ChaosOptions;
  leaseMs: number;
  /** The workers' tries limit: a turn on its last try is spared by the sandbox kills. */
  maxTries: number;
  docker: Dockerode;
  installId: string;
  /** The run's store, where the running turns and the workers' registrations are read. */
  store: Store;
  workers: BerthProcess[];
  /** Each worker's network namespace, by index (a partition cuts its link). */
  networks: WorkerNetwork[];
  nodeSet: NodeSet | null;
  /** Each worker incarnation's id, by pid. */
  workerIds: Map<number, string>;
  /** Restarted workers' registrations under way: the run waits for them before it stops them. */
  restarts: Promise<void>[];
  /** The requests answered so far: the faults are due by how many there are. */
  requests: RequestRecord[];
  /** With long turns: the long sessions whose turn asked for that call or a later one (long-turns.ts). */
  longTurnsPast?: (index: number) => string[];
}

/**
 * How long a worker started again mid-run (a killed worker, a replaced node) may take to
 * register: it starts on the run's loaded machine, and a replaced node's worker took about
 * 3 min at a load average of 40 (500 sessions on 2 cores: it needs seconds of CPU, and gets
 * a twentieth of a core). Slow is not lost; one that never registers still fails the run.
 */
const RESTART_TIMEOUT_MS = 600_000;
const WORKER_RESTART_DELAY_MS = 1000;
/**
 * Once a worker kill or a partition is due, wait at most this long for workers that run a
 * turn (on a loaded machine the status that says so can itself take seconds); after it,
 * what found no such worker is not injected.
 */
const WORKER_KILL_MAX_WAIT_MS = 60_000;
/** A killed node comes back empty this long after it died (a replacement machine; short, so the run sees it serve). */
const NODE_RESTART_DELAY_MS = 5000;

export function injectorForRun(run: RunTargets): FaultInjector {
  const { opts, requests, workerIds, longTurnsPast } = run;
  const turnsTotal = opts.sessions * opts.turns + (opts.longTurns ?? 0);
  const workerRows = () => run.store.listWorkers();
  const idOf = (w: BerthProcess) => (w.pid === undefined ? null : (workerIds.get(w.pid) ?? null));
  const runningTurns = runningTurnsIn(run.store, run.maxTries);
  const killable: KillableWorker[] = run.workers.map((w) => ({
    name: w.name,
    get pid() {
      return w.pid;
    },
    workerId: () => idOf(w),
    sigkill: () => w.sigkill(),
    restart: async () => {
      await w.restart();
      // Learn the new incarnation's id in the background; the run does not wait for it (the stop does).
      run.restarts.push(
        workerIdOf(workerRows, w, RESTART_TIMEOUT_MS).then(
          (id) => void workerIds.set(w.pid!, id),
          () => undefined,
        ),
      );
    },
  }));
  const killableNodes =
    run.nodeSet?.killable({
      workerId: idOf,
      registered: async (w) => {
        workerIds.set(w.pid!, await workerIdOf(workerRows, w, RESTART_TIMEOUT_MS));
      },
    }) ?? [];
  return new FaultInjector({
    engines: () => run.nodeSet?.engines() ?? [{ docker: run.docker, installId: run.installId }],
    killEveryMs: opts.killEveryMs,
    runningTurns,
    longTurnsDue: longTurnsPast && (() => longTurnsPast(KILL_CALL)),
    maxDurationMs: opts.durationCapMs,
    workerKill:
      opts.killWorkers > 0
        ? {
            workers: killable,
            count: opts.killWorkers,
            due: () => requests.length >= turnsTotal / 3,
            runningTurns,
            maxWaitForTurnsMs: WORKER_KILL_MAX_WAIT_MS,
            restartDelayMs: WORKER_RESTART_DELAY_MS,
          }
        : undefined,
    nodeKill:
      opts.nodes && opts.nodes.kill > 0
        ? {
            nodes: killableNodes,
            count: opts.nodes.kill,
            due: () => requests.length >= turnsTotal / 3,
            runningTurns,
            maxWaitForTurnsMs: WORKER_KILL_MAX_WAIT_MS,
            restartDelayMs: NODE_RESTART_DELAY_MS,
          }
        : undefined,
    blobsKill: opts.blobs?.killForMs
      ? {
          // With long turns, while the first one checkpoints at its calls: an outage in its uploads.
          due: () =>
            longTurnsPast ? longTurnsPast(BLOBS_KILL_CALL).length > 0 : requests.length >= turnsTotal / 2,
          kill: () => opts.blobs!.service.kill(),
          restart: () => opts.blobs!.service.restart(),
          downMs: opts.blobs.killForMs,
        }
      : undefined,
    partition: opts.partitionWorker && {
      workers: run.workers.map((w, i) => ({
        name: w.name,
        workerId: () => idOf(w),
        cut: () => run.networks[i]!.cut(),
        heal: () => run.networks[i]!.heal(),
      })),
      due: () => requests.length >= turnsTotal / 4,
      runningTurns,
      maxWaitForTurnsMs: WORKER_KILL_MAX_WAIT_MS,
      durationMs: opts.partitionWorker.durationMs ?? 2 * run.leaseMs,
      leaseMs: run.leaseMs,
    },
    storeRestart: opts.store?.restart && {
      ...opts.store.restart,
      due: () => requests.length >= turnsTotal / 2,
    },
    storeFailover: opts.store?.failover && {
      ...failoverActions(opts.store.failover),
      deaths: opts.store.failover.deaths,
      due: (k) => requests.length >= (turnsTotal * (k + 1)) / (opts.store!.failover!.deaths.length + 1),
    },
    onWarning: (m) => process.stderr.write(`berth chaos: ${m}\n`),
  });
}

/** What the injector does to a Patroni cluster's primary, and how it sees the failover. */
function failoverActions({ cluster, database }: NonNullable<NonNullable<ChaosOptions['store']>['failover']>) {
  return {
    kill: (what: PrimaryDeath) =>
      what === 'postmaster'
        ? cluster.killPrimaryPostmaster()
        : cluster.waitForLeader({ standby: false }).then(async (member) => ({
            member,
            ...(await cluster.killMember(member)),
          })),
    waitForNewPrimary: async (notMember: string, timeoutMs: number) => {
      const member = await cluster.waitForLeader({ notMember, standby: false, timeoutMs });
      return { member, promotedAt: await cluster.promotedAt(member) };
    },
    firstCommitAfter: (member: string, at: number) =>
      firstCommitAfter(cluster.memberUrl(member, database), at),
    restartMember: (member: string) => cluster.startMember(member),
    waitForStandby: () => cluster.waitForLeader().then(() => undefined),
  };
}
