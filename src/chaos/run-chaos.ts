/**
 * One chaos run, end to end: berth as separate processes (`berth up --slots 0` for the API,
 * W `berth worker`s sharing its data dir and its store: SQLite, or a PostgreSQL database),
 * a workload of N sessions x T turns through the public API (and, with `longTurns`, long
 * model turns against a scripted model: long-turns.ts), real faults meanwhile (sandbox
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
 *
 * The run is a sequence of stages (ChaosRun): prepare the data dir and settings, start
 * berth (relays, namespaces or nodes, the API, the workers), wire the faults, drive the
 * workload under them, stop berth, then check and report; whatever a stage started is
 * released in one place, tearDown(), which runs however the stages ended.
 */
import { setMaxListeners } from 'node:events';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type Dockerode from 'dockerode';
import { openBlobStore } from '../blobs/index.js';
import { ApiClient } from '../client/index.js';
import {
  blobsConfigOf,
  installIdOf,
  isBerthError,
  loadConfig,
  parseDurationMs,
  redactUrl,
} from '../core/index.js';
import { baseImageRecipe, baseImageTag } from '../image/index.js';
import { connectDocker } from '../runtime/index.js';
import { readAdminToken } from '../secrets/index.js';
import type { Store } from '../store/index.js';
import { buildReport, type ChaosReport, type ChaosSettings } from './build-report.js';
import type { ChaosOptions, ChaosProgress } from './chaos-options.js';
import { readChildLogs } from './child-logs.js';
import { BerthProcess, freePort, waitForHealthy, workerIdOf } from './children.js';
import type { StoreFailover } from './fault-records.js';
import type { FaultInjector } from './faults/index.js';
import { injectorForRun } from './injector-for-run.js';
import { checkInvariants, type ProcessEnd } from './invariants.js';
import { removeLeftovers } from './leftovers.js';
import { type LoadReport, LoadSampler } from './load-sampler.js';
import {
  LONG_AGENT,
  longSessionIds,
  longTurnsPast,
  putLongTurnAgent,
  startLongTurnModel,
} from './long-turns.js';
import { NodeSet } from './node-set.js';
import type { NodeEngineUsage, NodeUsageSampler } from './node-usage.js';
import type { ScriptedModel } from './scripted-model.js';
import { selfFencesIn } from './self-fences.js';
import { driveSession, type RequestRecord } from './session-driver.js';
import { openRunStore, readStoreSnapshot } from './snapshot.js';
import { firstFailedCallAfter } from './store-failover.js';
import { type StoreRelay, startStoreRelay } from './store-relay.js';
import {
  createWorkerNetworks,
  reapStaleNetworks,
  removeWorkerNetworks,
  requireNetworkNamespaces,
  type WorkerNetwork,
} from './worker-network.js';
import { longTurnPlan } from './workload.js';

const DEFAULT_WORKERS = 2;
const AGENT = 'chaos';
const START_TIMEOUT_MS = 120_000;
const STOP_GRACE_MS = 30_000;

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const run = await ChaosRun.prepare(opts);
  try {
    await run.startBerth();
    run.wireFaults();
    const workload = await run.driveWorkload();
    const ended = await run.stopBerth();
    return await run.checkAndReport(workload, ended);
  } finally {
    await run.tearDown();
  }
}

/** Where the run keeps its files, and what it knows before anything starts. */
interface RunSetup {
  startedAt: number;
  leaseMs: number;
  /** The data dir is a temp dir of the run's own (deleted at the end unless `keep`). */
  ownDir: boolean;
  dataDir: string;
  /** The API's data dir: `api/` of the data dir on nodes, else the data dir itself. */
  apiDir: string;
  port: number;
}

/** What the workload left: the sessions it drove (the long ones among them), the messages it could not send, and whether it was cut short. */
interface Workload {
  sessionIds: string[];
  longSessionIds: string[];
  notSent: number;
  cutShort: boolean;
}

/** What the run saw as berth stopped: the load, a node's engine cost, and how each process ended. */
interface Ended {
  load: LoadReport;
  engineUsage: NodeEngineUsage | null;
  processes: ProcessEnd[];
  /** Every started berth process's log, read once. */
  logs: string[];
}

/** One chaos run's resources, and its stages in the order runChaos calls them. */
class ChaosRun {
  private readonly startedAt: number;
  private readonly leaseMs: number;
  private readonly ownDir: boolean;
  private readonly dataDir: string;
  private readonly apiDir: string;
  private readonly installId: string;
  private readonly seed: number;
  private readonly env: NodeJS.ProcessEnv;
  private readonly docker: Dockerode;
  private readonly url: string;
  private readonly api: BerthProcess;
  private readonly workerCount: number;
  private readonly networks: WorkerNetwork[] = [];
  private readonly relays: StoreRelay[] = [];
  private readonly workers: BerthProcess[] = [];
  private readonly children: BerthProcess[];
  private nodeSet: NodeSet | null = null;
  private nodeUsage: NodeUsageSampler | null = null;
  private sampler: LoadSampler | null = null;
  private readonly workerIds = new Map<number, string>();
  /** Restarted workers' registrations (each bounded by the injector's restart timeout). */
  private readonly restarts: Promise<void>[] = [];
  private readonly requests: RequestRecord[] = [];
  private readonly turnsTotal: number;
  /** Ends the workload early: the duration cap, the caller's signal, or the tear-down. */
  private readonly cut = new AbortController();
  private readonly onAbort = () => this.cut.abort();
  private phase: ChaosProgress['phase'] = 'starting';
  private client: ApiClient | null = null;
  private injector: FaultInjector | null = null;
  /** Where the injector reads the running turns: the store itself, not the API (startBerth). */
  private runStore: Store | null = null;
  /** The long turns' model (startBerth); null without long turns. */
  private model: ScriptedModel | null = null;
  private readonly ticker: NodeJS.Timeout;

  /** Checks what the options need, and makes the data dirs; nothing runs yet. */
  static async prepare(opts: ChaosOptions): Promise<ChaosRun> {
    const startedAt = Date.now();
    const leaseMs = parseDurationMs(opts.lease);
    if (leaseMs === undefined) throw new Error(`lease "${opts.lease}" is not a duration (use 3s or 3000ms)`);
    if (opts.partitionWorker) {
      if (!opts.store)
        throw new Error(
          '--partition-worker needs a PostgreSQL store (--store postgres or a postgres:// URL)',
        );
      await requireNetworkNamespaces();
    }
    if (opts.longTurns && (opts.nodes || opts.partitionWorker))
      throw new Error(
        '--long-turns cannot be used with --nodes or --partition-worker: their workers do not reach the scripted model on this host; leave one out',
      );
    if (opts.nodes && !(opts.store && opts.blobs))
      throw new Error('--nodes needs a PostgreSQL store and an S3 service: nodes share nothing else');
    const ownDir = opts.dataDir === undefined;
    const dataDir = ownDir ? await mkdtemp(join(tmpdir(), 'berth-chaos-')) : resolve(opts.dataDir!);
    await mkdir(dataDir, { recursive: true });
    const apiDir = opts.nodes ? join(dataDir, 'api') : dataDir;
    await mkdir(apiDir, { recursive: true });
    const port = await freePort();
    return new ChaosRun(opts, { startedAt, leaseMs, ownDir, dataDir, apiDir, port });
  }

  /** From here on, tearDown() releases what the run holds: the abort listener and the progress ticker first. */
  private constructor(
    private readonly opts: ChaosOptions,
    setup: RunSetup,
  ) {
    const { leaseMs, dataDir, apiDir, port } = setup;
    this.startedAt = setup.startedAt;
    this.leaseMs = leaseMs;
    this.ownDir = setup.ownDir;
    this.dataDir = dataDir;
    this.apiDir = apiDir;
    this.installId = installIdOf(apiDir);
    this.seed = opts.seed ?? Math.floor(Math.random() * 2 ** 31);
    const env: NodeJS.ProcessEnv = {
      ...(opts.env ?? process.env),
      BERTH_DATA: apiDir,
      BERTH_PORT: String(port),
      BERTH_HOST: '127.0.0.1',
      BERTH_LEASE: opts.lease,
      BERTH_LOG_LEVEL: opts.logLevel ?? 'warn',
      // The run's final SIGTERM drains each worker: well within STOP_GRACE_MS, past which a
      // child is SIGKILLed and counted as one that ignored SIGTERM.
      BERTH_DRAIN_GRACE: `${STOP_GRACE_MS / 3}ms`,
      BERTH_STORE: opts.store?.url ?? '',
      ...(opts.blobs ? { BERTH_BLOBS: `s3://${opts.blobs.bucket}/berth`, ...opts.blobs.service.env() } : {}),
    };
    delete env.BERTH_URL;
    delete env.BERTH_SLOTS;
    this.env = env;
    this.docker = connectDocker(loadConfig(env).dockerSocket);
    this.url = `http://127.0.0.1:${port}`;
    this.api = new BerthProcess('api', ['up', '--slots', '0'], env, join(dataDir, 'api.log'));
    this.workerCount = opts.nodes?.count ?? opts.workers ?? DEFAULT_WORKERS;
    this.children = [this.api];
    this.turnsTotal = opts.sessions * opts.turns + (opts.longTurns ?? 0);
    // Each session's request in flight listens for the cut.
    setMaxListeners(opts.sessions + (opts.longTurns ?? 0) + 10, this.cut.signal);
    opts.signal?.addEventListener('abort', this.onAbort, { once: true });
    this.ticker = setInterval(() => this.progress(), 500);
  }

  /** Starts berth: relays and namespaces (or nodes), the API, then the workers one at a time, and the agent. */
  async startBerth(): Promise<void> {
    const { opts, env, networks, relays, workers } = this;
    this.progress();
    const workerArgs = ['worker', '--slots', String(opts.slotsPerWorker)];
    if (opts.partitionWorker && !opts.nodes) {
      await reapStaleNetworks();
      networks.push(...(await createWorkerNetworks(this.workerCount)));
      for (const n of networks) relays.push(await startStoreRelay(opts.store!.url, n.hostAddress));
    }
    if (!opts.nodes)
      for (let i = 0; i < this.workerCount; i++) {
        const name = `worker-${i + 1}`;
        const workerEnv = relays[i] ? { ...env, BERTH_STORE: relays[i]!.url } : env;
        workers.push(
          new BerthProcess(name, workerArgs, workerEnv, join(this.dataDir, `${name}.log`), {
            netnsPath: networks[i]?.path,
          }),
        );
      }
    if (opts.longTurns) this.model = await startLongTurnModel(env);
    this.api.start();
    // The API host builds the base image at start when its engine lacks it: the nodes' engines get a copy.
    await waitForHealthy(this.url, this.api, START_TIMEOUT_MS);
    if (opts.nodes) {
      this.nodeSet = await NodeSet.start({
        count: opts.nodes.count,
        runDir: this.dataDir,
        hostDocker: this.docker,
        image: loadConfig(env).image || baseImageTag(await baseImageRecipe(join(this.apiDir, 'cache'))),
        storeUrl: opts.store!.url,
        s3Endpoint: opts.blobs!.service.endpoint,
        workerArgs,
        env,
      });
      workers.push(...this.nodeSet.workers);
      networks.push(...this.nodeSet.nodes.map((n) => n.network));
    }
    this.children.push(...workers);
    // The API process wrote the admin token at start: this run acts as the operator.
    const client = new ApiClient(this.url, (await readAdminToken(this.apiDir)) ?? undefined);
    this.client = client;
    // The API's /v1/status waits behind every session's event stream in its store queue
    // (40-60 s with 500 sessions on this machine): workers and running turns are read from the store.
    const store = await openRunStore(this.apiDir, this.leaseMs, opts.store?.url ?? '');
    this.runStore = store;
    const workerRows = () => store.listWorkers();
    // One at a time: each worker's start-up mounts the shared slot root and reaps leftovers.
    for (const w of workers) {
      w.start();
      this.workerIds.set(w.pid!, await workerIdOf(workerRows, w, START_TIMEOUT_MS));
    }
    await client
      .request('POST', '/v1/agents', { name: AGENT, provider: 'script', memoryMb: 256 })
      .catch((err: unknown) => {
        if (!(isBerthError(err) && err.code === 'AGENT_EXISTS')) throw err;
      });
    if (this.model) await putLongTurnAgent(client, this.model);
  }

  /** Makes the injector, aimed at the processes startBerth started; it injects once driveWorkload starts it. */
  wireFaults(): void {
    this.injector = injectorForRun({
      opts: this.opts,
      leaseMs: this.leaseMs,
      maxTries: loadConfig(this.env).maxTries,
      docker: this.docker,
      installId: this.installId,
      store: this.runStore!,
      workers: this.workers,
      networks: this.networks,
      nodeSet: this.nodeSet,
      workerIds: this.workerIds,
      restarts: this.restarts,
      requests: this.requests,
      longTurnsPast: this.model ? longTurnsPast(this.model) : undefined,
    });
  }

  /** Samples the load, starts the faults, and drives every session to its end, the duration cap or the cut. */
  async driveWorkload(): Promise<Workload> {
    const { opts, cut } = this;
    const injector = this.injector!;
    const sampler = new LoadSampler(
      () => this.children.map((c) => c.pid).filter((pid): pid is number => pid !== undefined),
      opts.store?.url ?? null,
    );
    this.sampler = sampler;
    await sampler.start();
    this.nodeUsage = this.nodeSet?.usageSampler() ?? null;
    await this.nodeUsage?.start();
    this.phase = 'running';
    injector.start();
    const capTimer = setTimeout(() => cut.abort(), opts.durationCapMs);
    const runTag = Date.now().toString(36).slice(-4);
    const sessionIds = Array.from({ length: opts.sessions }, (_, i) => `chaos-${runTag}-${i + 1}`);
    const longIds = longSessionIds(runTag, opts.longTurns ?? 0);
    const driver = {
      client: this.client!,
      seed: this.seed,
      messageTimeoutMs: opts.messageTimeoutMs ?? 120_000,
      abort: cut.signal,
      onRecord: (r: RequestRecord) => {
        this.requests.push(r);
        this.progress();
      },
    };
    const long = { ...driver, agent: LONG_AGENT, turns: 1, plan: longPlan };
    // Long sessions first: their messages are the oldest pending, so their turns start first and do not trail the run.
    const notSent = await Promise.all([
      ...longIds.map((id, i) => driveSession(long, i, id)),
      ...sessionIds.map((id, i) => driveSession({ ...driver, agent: AGENT, turns: opts.turns }, i, id)),
    ]).finally(() => clearTimeout(capTimer));
    return {
      sessionIds: [...sessionIds, ...longIds],
      longSessionIds: longIds,
      notSent: notSent.reduce((a, b) => a + b, 0),
      cutShort: cut.signal.aborted,
    };
  }

  /** Stops the faults and the samplers, then every berth process, and dates each failover's first failed call. */
  async stopBerth(): Promise<Ended> {
    const { children } = this;
    const injector = this.injector!;
    this.phase = 'stopping';
    await injector.stop();
    const load = await this.sampler!.stop();
    const engineUsage: NodeEngineUsage | null = (await this.nodeUsage?.stop()) ?? null;
    // A berth process that died on its own (not our SIGKILL) during the workload is a finding, not noise.
    const aliveAtEnd = children.map((c) => ({ name: c.name, alive: c.running, lastExit: c.lastExit }));
    // A restarted worker is stopped once it has started: SIGTERM while it still loads its code ends it by the signal.
    await Promise.all(this.restarts);
    const stopped = await Promise.all(children.map((c) => c.stop(STOP_GRACE_MS)));
    const processes = aliveAtEnd.map((p, i) => ({ ...p, stop: stopped[i]! }));
    const logs = await readChildLogs(children);
    dateFirstFailures(
      injector.faults.filter((f): f is StoreFailover => f.kind === 'store-failover'),
      logs,
    );
    return { load, engineUsage, processes, logs };
  }

  /** Reads the store once every berth process is gone, runs the checker, and builds the report. */
  async checkAndReport(workload: Workload, ended: Ended): Promise<ChaosReport> {
    const { opts, apiDir, leaseMs, installId, docker } = this;
    const injector = this.injector!;
    this.phase = 'checking';
    const sessions = await readStoreSnapshot(apiDir, workload.sessionIds, leaseMs, opts.store?.url ?? '');
    const blobs = await openBlobStore(blobsConfigOf(loadConfig(this.env)));
    const set = this.nodeSet;
    const invariants = await checkInvariants({
      dataDir: apiDir,
      installId,
      docker,
      sessions,
      requests: this.requests,
      processes: ended.processes,
      blobs,
      nodes: set
        ? { orphans: () => set.orphans({ name: 'api', dataDir: apiDir, installId, docker }) }
        : undefined,
    }).finally(() => blobs.close());
    this.phase = 'done';
    return buildReport({
      settings: this.settings(),
      wallMs: Date.now() - this.startedAt,
      cutShort: workload.cutShort,
      requests: this.requests,
      notSent: workload.notSent,
      faults: injector.faults,
      skippedFaults: injector.skipped,
      selfFences: ended.logs.flatMap(selfFencesIn),
      load: ended.load,
      sessions,
      invariants,
      longTurns: this.model && { sessionIds: workload.longSessionIds, calls: this.model.calls },
      nodes:
        set && ended.engineUsage
          ? { count: set.nodes.length, usage: ended.engineUsage, starts: set.nodes.flatMap((n) => n.starts) }
          : null,
    });
  }

  /** Releases everything, however the stages ended: the leftovers only after the checker recorded them. */
  async tearDown(): Promise<void> {
    const { opts } = this;
    opts.signal?.removeEventListener('abort', this.onAbort);
    clearInterval(this.ticker);
    this.cut.abort();
    await this.injector?.stop().catch(() => undefined);
    await Promise.all(this.children.map((c) => c.stop(5000).catch(() => undefined)));
    await this.nodeUsage?.stop().catch(() => undefined);
    await this.runStore?.close().catch(() => undefined);
    await Promise.all(this.relays.map((r) => r.close().catch(() => undefined)));
    await this.model?.close();
    await this.nodeSet?.remove();
    if (!this.nodeSet) await removeWorkerNetworks(this.networks.map((n) => n.name));
    await removeLeftovers(this.docker, this.installId, this.apiDir);
    if (this.ownDir && !opts.keep)
      await rm(this.dataDir, { recursive: true, force: true }).catch(() => undefined);
    this.progress();
  }

  /** The settings the report states. */
  private settings(): ChaosSettings {
    const { opts, leaseMs } = this;
    return {
      sessions: opts.sessions,
      turns: opts.turns,
      longTurns: opts.longTurns ?? 0,
      slotsPerWorker: opts.slotsPerWorker,
      workers: this.workers.length,
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
      seed: this.seed,
      dataDir: this.dataDir,
      dataDirKept: !this.ownDir || opts.keep === true,
    };
  }

  private progress(): void {
    const { requests } = this;
    const injector = this.injector;
    this.opts.onProgress?.({
      phase: this.phase,
      turnsDone: requests.length,
      turnsTotal: this.turnsTotal,
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
      elapsedMs: Date.now() - this.startedAt,
    });
  }
}

/** A long session's message: its one long turn. */
const longPlan = (_sessionIndex: number, turn: number, o: { session: string }) =>
  longTurnPlan(o.session, turn);

/** Each failover's MTTD end: the first failed store call logged after it, before the next one. */
function dateFirstFailures(failovers: StoreFailover[], logs: string[]): void {
  for (const [i, f] of failovers.entries())
    f.firstFailureAt = firstFailedCallAfter(logs, f.at, failovers[i + 1]?.at ?? Number.POSITIVE_INFINITY);
}
