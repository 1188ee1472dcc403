/**
 * One chaos run, end to end: berth as separate processes (`berth up --slots 0` for the API,
 * W `berth worker`s sharing its data dir and its store: SQLite, or a PostgreSQL database),
 * a workload of N sessions x T turns through the public API, real faults meanwhile (sandbox
 * kills, K workers SIGKILLed at once, a database restart, the primary of a replicated
 * database killed, a worker partitioned from the store), a clean shutdown, then the checker
 * and the report.
 *
 * With a partition, every worker runs in a network namespace of its own (worker-network.ts)
 * and reaches the store through a relay on the host end of its veth (store-relay.ts): the
 * partition is a real cut link, not a flag.
 *
 * On nodes (node-set.ts), each worker is the worker of a machine of its own: its network
 * namespace, Docker engine, disk and cgroup; the nodes share only the PostgreSQL store and
 * a bucket of the S3 service, and some of them die whole mid-run (and come back empty).
 * The API keeps its data dir (`api/`) outside the nodes' disks (`nodes/`).
 *
 * Invariants:
 * - Always cleans up, on success, failure or exception: every child is stopped (SIGKILL
 *   if SIGTERM does not end it in STOP_GRACE_MS), relays and namespaces are removed
 *   (and those of dead earlier runs reaped at start), leftovers berth failed to remove are
 *   removed AFTER the checker recorded them, and a temp data dir is deleted unless `keep`.
 * - Bounded: start-up, each request (`messageTimeoutMs`), the workload (`durationCapMs`),
 *   the injector and the shutdown each have a time limit.
 * - The checker reads the store only after every berth process has exited.
 */
import { setMaxListeners } from 'node:events';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { readAdminToken } from '../api/index.js';
import { openBlobStore } from '../blobs/index.js';
import { ApiClient } from '../client/index.js';
import { blobsConfigOf, isBerthError, loadConfig, parseDurationMs, redactUrl } from '../core/index.js';
import { baseImageRecipe, baseImageTag } from '../image/index.js';
import { connectDocker } from '../runtime/index.js';
import type { Store } from '../store/index.js';
import { installIdOf } from '../worker/index.js';
import { readChildLogs } from './child-logs.js';
import { BerthProcess, freePort, waitForHealthy, workerIdOf } from './children.js';
import {
  type KillableWorker,
  type PrimaryDeath,
  runningTurnsIn,
  type StoreFailover,
} from './fault-records.js';
import { FaultInjector } from './faults.js';
import { checkInvariants } from './invariants.js';
import { removeLeftovers } from './leftovers.js';
import { LoadSampler } from './load-sampler.js';
import { NodeSet } from './node-set.js';
import type { NodeEngineUsage, NodeUsageSampler } from './node-usage.js';
import type { PatroniCluster } from './patroni-cluster.js';
import { buildReport, type ChaosReport, type ChaosSettings } from './report.js';
import type { S3Service } from './s3-service.js';
import { selfFencesIn } from './self-fences.js';
import { driveSession, type RequestRecord } from './session-driver.js';
import { openRunStore, readStoreSnapshot } from './snapshot.js';
import { firstCommitAfter, firstFailedCallAfter } from './store-failover.js';
import { type StoreRelay, startStoreRelay } from './store-relay.js';
import {
  createWorkerNetworks,
  reapStaleNetworks,
  removeWorkerNetworks,
  requireNetworkNamespaces,
  type WorkerNetwork,
} from './worker-network.js';

export interface ChaosOptions {
  sessions: number;
  turns: number;
  /** The workload stops (unfinished requests become unknown) after this, ms. */
  durationCapMs: number;
  killEveryMs: { min: number; max: number };
  /** Workers SIGKILLed at once about a third into the run (and restarted 1 s later); 0 = none. */
  killWorkers: number;
  /** Worker processes. @default 2 */
  workers?: number;
  /** The store of every process: default SQLite in the data dir. */
  store?: {
    /** postgres:// URL. */
    url: string;
    /** Restart the database server once, halfway through the run: stop, `downMs` down, start. */
    restart?: { stop(): Promise<void>; start(): Promise<void>; downMs: number };
    /**
     * The store is this replicated cluster (`url` is its multi-host URL of `database`): its
     * primary dies once per entry of `deaths`, the k-th of n when k/(n+1) of the turns are done.
     */
    failover?: { cluster: PatroniCluster; database: string; deaths: PrimaryDeath[] };
  };
  /**
   * Cut one worker's network link for `durationMs` (default two leases) about a quarter
   * into the run, then heal it. Needs a PostgreSQL store, root and iproute2.
   */
  partitionWorker?: { durationMs?: number };
  /**
   * Every process keeps its blobs (the workspace chains among them) in a bucket of this S3
   * service; default: file blobs in the data dir. `killForMs`: its daemon is SIGKILLed
   * halfway through the run, held down that long, and started again.
   */
  blobs?: { service: S3Service; bucket: string; killForMs?: number };
  /**
   * The workers run on `count` nodes (node-set.ts), one each; `kill` of them die at once
   * about a third into the run and come back empty. Needs a PostgreSQL store, `blobs`,
   * root, iproute2 and a cgroup v1 freezer. `workers` is then `count`.
   */
  nodes?: { count: number; kill: number };
  slotsPerWorker: number;
  /** BERTH_LEASE of the children, e.g. '3s'. */
  lease: string;
  /** Use this data dir (kept); default a fresh temp dir. */
  dataDir?: string;
  /** Keep the temp data dir (store, logs, workspaces) for inspection. */
  keep?: boolean;
  seed?: number;
  messageTimeoutMs?: number;
  /** BERTH_LOG_LEVEL of the children (their stderr goes to <data>/api.log, worker-N.log). @default warn */
  logLevel?: string;
  /** Environment of the children (BERTH_* settings pass through); the run sets DATA, PORT, LEASE, LOG_LEVEL. */
  env?: NodeJS.ProcessEnv;
  onProgress?: (p: ChaosProgress) => void;
  /** Aborting it ends the workload early (like the duration cap); shutdown, check and cleanup still run. */
  signal?: AbortSignal;
}

export interface ChaosProgress {
  phase: 'starting' | 'running' | 'stopping' | 'checking' | 'done';
  turnsDone: number;
  turnsTotal: number;
  ok: number;
  fail: number;
  unknown: number;
  sandboxKills: number;
  workerKills: number;
  storeRestarts: number;
  storeFailovers: number;
  partitions: number;
  nodeKills: number;
  blobsKills: number;
  elapsedMs: number;
}

const DEFAULT_WORKERS = 2;
const AGENT = 'chaos';
const START_TIMEOUT_MS = 120_000;
/**
 * How long a worker started again mid-run (a killed worker, a replaced node) may take to
 * register: it starts on the run's loaded machine, and a replaced node's worker took about
 * 3 min at a load average of 40 (500 sessions on 2 cores: it needs seconds of CPU, and gets
 * a twentieth of a core). Slow is not lost; one that never registers still fails the run.
 */
const RESTART_TIMEOUT_MS = 600_000;
const STOP_GRACE_MS = 30_000;
const WORKER_RESTART_DELAY_MS = 1000;
/**
 * Once a worker kill or a partition is due, wait at most this long for workers that run a
 * turn (on a loaded machine the status that says so can itself take seconds); after it,
 * what found no such worker is not injected.
 */
const WORKER_KILL_MAX_WAIT_MS = 60_000;
/** A killed node comes back empty this long after it died (a replacement machine; short, so the run sees it serve). */
const NODE_RESTART_DELAY_MS = 5000;

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const startedAt = Date.now();
  const leaseMs = parseDurationMs(opts.lease);
  if (leaseMs === undefined) throw new Error(`lease "${opts.lease}" is not a duration (use 3s or 3000ms)`);
  if (opts.partitionWorker) {
    if (!opts.store)
      throw new Error('--partition-worker needs a PostgreSQL store (--store postgres or a postgres:// URL)');
    await requireNetworkNamespaces();
  }
  if (opts.nodes && !(opts.store && opts.blobs))
    throw new Error('--nodes needs a PostgreSQL store and an S3 service: nodes share nothing else');
  const ownDir = opts.dataDir === undefined;
  const dataDir = ownDir ? await mkdtemp(join(tmpdir(), 'berth-chaos-')) : resolve(opts.dataDir!);
  await mkdir(dataDir, { recursive: true });
  const apiDir = opts.nodes ? join(dataDir, 'api') : dataDir;
  await mkdir(apiDir, { recursive: true });
  const installId = installIdOf(apiDir);
  const seed = opts.seed ?? Math.floor(Math.random() * 2 ** 31);
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...(opts.env ?? process.env),
    BERTH_DATA: apiDir,
    BERTH_PORT: String(port),
    BERTH_HOST: '127.0.0.1',
    BERTH_LEASE: opts.lease,
    BERTH_LOG_LEVEL: opts.logLevel ?? 'warn',
    BERTH_STORE: opts.store?.url ?? '',
    ...(opts.blobs ? { BERTH_BLOBS: `s3://${opts.blobs.bucket}/berth`, ...opts.blobs.service.env() } : {}),
  };
  delete env.BERTH_URL;
  delete env.BERTH_SLOTS;
  const docker = connectDocker(loadConfig(env).dockerSocket);
  const url = `http://127.0.0.1:${port}`;
  const api = new BerthProcess('api', ['up', '--slots', '0'], env, join(dataDir, 'api.log'));
  const workerCount = opts.nodes?.count ?? opts.workers ?? DEFAULT_WORKERS;
  const networks: WorkerNetwork[] = [];
  const relays: StoreRelay[] = [];
  const workers: BerthProcess[] = [];
  let nodeSet: NodeSet | null = null;
  let nodeUsage: NodeUsageSampler | null = null;
  const children = [api];
  const workerIds = new Map<number, string>();
  /** Restarted workers' registrations (each bounded by RESTART_TIMEOUT_MS). */
  const restarts: Promise<void>[] = [];
  const requests: RequestRecord[] = [];
  const turnsTotal = opts.sessions * opts.turns;
  const cut = new AbortController();
  // Each session's request in flight listens for the cut.
  setMaxListeners(opts.sessions + 10, cut.signal);
  const onAbort = () => cut.abort();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  let phase: ChaosProgress['phase'] = 'starting';
  let injector: FaultInjector | null = null;
  /** Where the injector reads the running turns: the store itself, not the API (below). */
  let runStore: Store | null = null;
  const progress = () =>
    opts.onProgress?.({
      phase,
      turnsDone: requests.length,
      turnsTotal,
      ok: requests.filter((r) => r.outcome === 'ok').length,
      fail: requests.filter((r) => r.outcome === 'fail').length,
      unknown: requests.filter((r) => r.outcome === 'unknown').length,
      sandboxKills: injector?.count('sandbox-kill') ?? 0,
      workerKills: injector?.count('worker-kill') ?? 0,
      storeRestarts: injector?.count('store-restart') ?? 0,
      storeFailovers: injector?.count('store-failover') ?? 0,
      partitions: injector?.count('partition') ?? 0,
      nodeKills: injector?.count('node-kill') ?? 0,
      blobsKills: injector?.count('blobs-kill') ?? 0,
      elapsedMs: Date.now() - startedAt,
    });
  const ticker = setInterval(progress, 500);
  try {
    progress();
    const workerArgs = ['worker', '--slots', String(opts.slotsPerWorker)];
    if (opts.partitionWorker && !opts.nodes) {
      await reapStaleNetworks();
      networks.push(...(await createWorkerNetworks(workerCount)));
      for (const n of networks) relays.push(await startStoreRelay(opts.store!.url, n.hostAddress));
    }
    if (!opts.nodes)
      for (let i = 0; i < workerCount; i++) {
        const name = `worker-${i + 1}`;
        const workerEnv = relays[i] ? { ...env, BERTH_STORE: relays[i]!.url } : env;
        workers.push(
          new BerthProcess(name, workerArgs, workerEnv, join(dataDir, `${name}.log`), {
            netnsPath: networks[i]?.path,
          }),
        );
      }
    api.start();
    // The API host builds the base image at start when its engine lacks it: the nodes' engines get a copy.
    await waitForHealthy(url, api, START_TIMEOUT_MS);
    if (opts.nodes) {
      nodeSet = await NodeSet.start({
        count: opts.nodes.count,
        runDir: dataDir,
        hostDocker: docker,
        image: loadConfig(env).image || baseImageTag(await baseImageRecipe(join(apiDir, 'cache'))),
        storeUrl: opts.store!.url,
        s3Endpoint: opts.blobs!.service.endpoint,
        workerArgs,
        env,
      });
      workers.push(...nodeSet.workers);
      networks.push(...nodeSet.nodes.map((n) => n.network));
    }
    children.push(...workers);
    // The API process wrote the admin token at start: this run acts as the operator.
    const client = new ApiClient(url, (await readAdminToken(apiDir)) ?? undefined);
    // The API's /v1/status waits behind every session's event stream in its store queue
    // (40-60 s with 500 sessions on this machine): workers and running turns are read from the store.
    runStore = await openRunStore(apiDir, leaseMs, opts.store?.url ?? '');
    const store = runStore;
    const workerRows = () => store.listWorkers();
    // One at a time: each worker's start-up mounts the shared slot root and reaps leftovers.
    for (const w of workers) {
      w.start();
      workerIds.set(w.pid!, await workerIdOf(workerRows, w, START_TIMEOUT_MS));
    }
    await client
      .request('POST', '/v1/agents', { name: AGENT, provider: 'script', memoryMb: 256 })
      .catch((err: unknown) => {
        if (!(isBerthError(err) && err.code === 'AGENT_EXISTS')) throw err;
      });

    const runningTurns = runningTurnsIn(store);
    const killable: KillableWorker[] = workers.map((w) => ({
      name: w.name,
      get pid() {
        return w.pid;
      },
      workerId: () => (w.pid === undefined ? null : (workerIds.get(w.pid) ?? null)),
      sigkill: () => w.sigkill(),
      restart: async () => {
        await w.restart();
        // Learn the new incarnation's id in the background; the run does not wait for it (the stop does).
        restarts.push(
          workerIdOf(workerRows, w, RESTART_TIMEOUT_MS).then(
            (id) => void workerIds.set(w.pid!, id),
            () => undefined,
          ),
        );
      },
    }));
    const killableNodes =
      nodeSet?.killable({
        workerId: (w) => (w.pid === undefined ? null : (workerIds.get(w.pid) ?? null)),
        registered: async (w) => {
          workerIds.set(w.pid!, await workerIdOf(workerRows, w, RESTART_TIMEOUT_MS));
        },
      }) ?? [];
    injector = new FaultInjector({
      engines: () => nodeSet?.engines() ?? [{ docker, installId }],
      killEveryMs: opts.killEveryMs,
      runningTurns,
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
            due: () => requests.length >= turnsTotal / 2,
            kill: () => opts.blobs!.service.kill(),
            restart: () => opts.blobs!.service.restart(),
            downMs: opts.blobs.killForMs,
          }
        : undefined,
      partition: opts.partitionWorker && {
        workers: workers.map((w, i) => ({
          name: w.name,
          workerId: () => (w.pid === undefined ? null : (workerIds.get(w.pid) ?? null)),
          cut: () => networks[i]!.cut(),
          heal: () => networks[i]!.heal(),
        })),
        due: () => requests.length >= turnsTotal / 4,
        runningTurns,
        maxWaitForTurnsMs: WORKER_KILL_MAX_WAIT_MS,
        durationMs: opts.partitionWorker.durationMs ?? 2 * leaseMs,
        leaseMs,
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
    const sampler = new LoadSampler(
      () => children.map((c) => c.pid).filter((pid): pid is number => pid !== undefined),
      opts.store?.url ?? null,
    );
    await sampler.start();
    nodeUsage = nodeSet?.usageSampler() ?? null;
    await nodeUsage?.start();
    phase = 'running';
    injector.start();
    const capTimer = setTimeout(() => cut.abort(), opts.durationCapMs);
    const runTag = Date.now().toString(36).slice(-4);
    const sessionIds = Array.from({ length: opts.sessions }, (_, i) => `chaos-${runTag}-${i + 1}`);
    const notSent = await Promise.all(
      sessionIds.map((id, i) =>
        driveSession(
          {
            client,
            agent: AGENT,
            turns: opts.turns,
            seed,
            messageTimeoutMs: opts.messageTimeoutMs ?? 120_000,
            abort: cut.signal,
            onRecord: (r) => {
              requests.push(r);
              progress();
            },
          },
          i,
          id,
        ),
      ),
    ).finally(() => clearTimeout(capTimer));
    const cutShort = cut.signal.aborted;

    phase = 'stopping';
    await injector.stop();
    const load = await sampler.stop();
    const engineUsage: NodeEngineUsage | null = (await nodeUsage?.stop()) ?? null;
    // A berth process that died on its own (not our SIGKILL) during the workload is a finding, not noise.
    const aliveAtEnd = children.map((c) => ({ name: c.name, alive: c.running, lastExit: c.lastExit }));
    // A restarted worker is stopped once it has started: SIGTERM while it still loads its code ends it by the signal.
    await Promise.all(restarts);
    const stopped = await Promise.all(children.map((c) => c.stop(STOP_GRACE_MS)));
    const processes = aliveAtEnd.map((p, i) => ({ ...p, stop: stopped[i]! }));
    const logs = await readChildLogs(children);
    dateFirstFailures(
      injector.faults.filter((f): f is StoreFailover => f.kind === 'store-failover'),
      logs,
    );

    phase = 'checking';
    const sessions = await readStoreSnapshot(apiDir, sessionIds, leaseMs, opts.store?.url ?? '');
    const blobs = await openBlobStore(blobsConfigOf(loadConfig(env)));
    const set = nodeSet;
    const invariants = await checkInvariants({
      dataDir: apiDir,
      installId,
      docker,
      sessions,
      requests,
      processes,
      blobs,
      nodes: set
        ? { orphans: () => set.orphans({ name: 'api', dataDir: apiDir, installId, docker }) }
        : undefined,
    }).finally(() => blobs.close());
    const settings: ChaosSettings = {
      sessions: opts.sessions,
      turns: opts.turns,
      slotsPerWorker: opts.slotsPerWorker,
      workers: workers.length,
      killEveryMs: opts.killEveryMs,
      killWorkers: opts.killWorkers,
      nodes: opts.nodes?.count ?? null,
      killNodes: opts.nodes?.kill ?? 0,
      blobsDownMs: opts.blobs?.killForMs ?? null,
      store: opts.store ? redactUrl(opts.store.url) : 'sqlite',
      storeDownMs: opts.store?.restart?.downMs ?? null,
      partitionMs: opts.partitionWorker ? (opts.partitionWorker.durationMs ?? 2 * leaseMs) : null,
      storeFailovers: opts.store?.failover?.deaths ?? [],
      leaseMs,
      durationCapMs: opts.durationCapMs,
      seed,
      dataDir,
      dataDirKept: !ownDir || opts.keep === true,
    };
    phase = 'done';
    return buildReport({
      settings,
      wallMs: Date.now() - startedAt,
      cutShort,
      requests,
      notSent: notSent.reduce((a, b) => a + b, 0),
      faults: injector.faults,
      skippedFaults: injector.skipped,
      selfFences: logs.flatMap(selfFencesIn),
      load,
      sessions,
      invariants,
      nodes:
        set && engineUsage
          ? { count: set.nodes.length, usage: engineUsage, starts: set.nodes.flatMap((n) => n.starts) }
          : null,
    });
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    clearInterval(ticker);
    cut.abort();
    await injector?.stop().catch(() => undefined);
    await Promise.all(children.map((c) => c.stop(5000).catch(() => undefined)));
    await nodeUsage?.stop().catch(() => undefined);
    await runStore?.close().catch(() => undefined);
    await Promise.all(relays.map((r) => r.close().catch(() => undefined)));
    await nodeSet?.remove();
    if (!nodeSet) await removeWorkerNetworks(networks.map((n) => n.name));
    await removeLeftovers(docker, installId, apiDir);
    if (ownDir && !opts.keep) await rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
    progress();
  }
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

/** Each failover's MTTD end: the first failed store call logged after it, before the next one. */
function dateFirstFailures(failovers: StoreFailover[], logs: string[]): void {
  for (const [i, f] of failovers.entries())
    f.firstFailureAt = firstFailedCallAfter(logs, f.at, failovers[i + 1]?.at ?? Number.POSITIVE_INFINITY);
}
