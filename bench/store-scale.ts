/**
 * The PostgreSQL store at 10k, 100k and 1M sessions (10 % runnable) under 10,000 simulated
 * workers at berth's real rates (store-load.ts), on a throw-away durable cluster (fsync on).
 * `npm run bench -- storeScale [--sizes=10000,100000] [--workers=1000]`; `--quick`: 10k
 * sessions, 1,000 workers. Per size, on a fresh database seeded in a few statements (store-seed.ts), whose
 * busy sessions (one per worker, at most 10 % of the sessions) run turns:
 *
 * - fleet: every worker renews its row and sweeps every leaseMs / 5 (10 s lease): renewals/s
 *   against the target, renewal and sweep latency, the time between a worker's renewals,
 *   WAL bytes and write transactions per second, CPU of the server and of this process
 *   (which simulates every worker on the same machine);
 * - turns: the fleet, and CONCURRENCY slots that free at once (turns of no length) claiming
 *   as fast as they can (SKIP LOCKED): claims/s, claim latency;
 * - deadWorkers: 1 % of the workers, each holding a running turn, stop: the sweeps that take
 *   their sessions over;
 * - reclaimAll: the fleet stopped a lease ago, one sweep takes every lease over;
 * - ops: each store call alone (one caller, nothing else running): latency, and the server's
 *   CPU per call; a session's view (its queue position) at the queue's head, middle and tail;
 * - statements: server time per execution of each berth statement (pg_stat_statements);
 * - baseline: the statements this replaced (before the queue keys), verbatim, timed on the
 *   same data beside their replacements;
 * - notify: a message's notification reaching LISTENERS listening connections.
 * Once per run (full runs): the fleet at growing sizes (where renewals fall behind on this
 * machine), the fan-out at 10, 100 and 1000 listeners, and commits/s of transactions that
 * NOTIFY inside, after and not at all.
 */
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { type PostgresCluster, startPostgresCluster } from '../src/chaos/index.js';
import { sleep } from '../src/core/index.js';
import { openPostgresStore, type Store } from '../src/store/index.js';
import { positionalValues, toPositional } from '../src/store/postgres/named-params.js';
import { POSTGRES_STATEMENTS } from '../src/store/postgres/statements.js';
import * as shared from '../src/store/sql/statements.js';
import { type BenchOptions, round, stats, timeEach } from './harness.js';
import { createBenchAgent, Fleet, type LoadLog, newLoadLog, registerWorkers } from './store-load.js';
import { seedSessions, sessionId } from './store-seed.js';

const LEASE_MS = 10_000;
const RETRY = { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 };
/** Stores the simulated workers share: 10 connections each (and one listening). */
const STORES = 4;
const CONCURRENCY = 16;
const LISTENERS = 100;
const FAN_OUT_LISTENERS = [10, 100, 1000];
const FLEET_SIZES = [500, 1000, 2500, 5000, 10_000];
const AGENT = 'b';
const CHANNEL = 'berth_changes';

/** A durable server (fsync and synchronous commit on), room for the listeners, statement statistics. */
const SETTINGS = {
  fsync: 'on',
  synchronous_commit: 'on',
  max_connections: 1100,
  shared_buffers: '2GB',
  max_wal_size: '4GB',
  shared_preload_libraries: 'pg_stat_statements',
  'pg_stat_statements.max': 1000,
};

export interface ScaleOptions {
  sizes: number[];
  workers: number;
  fleetMs: number;
  turnsMs: number;
  fanOut: boolean;
}

export async function storeScale({ quick }: BenchOptions) {
  const sizesArg = process.argv.find((a) => a.startsWith('--sizes='));
  const sizes = sizesArg
    ? sizesArg.slice('--sizes='.length).split(',').map(Number)
    : quick
      ? [10_000]
      : [10_000, 100_000, 1_000_000];
  const workersArg = process.argv.find((a) => a.startsWith('--workers='));
  return runStoreScale({
    sizes,
    workers: workersArg ? Number(workersArg.slice('--workers='.length)) : quick ? 1000 : 10_000,
    fleetMs: quick ? 5000 : 20_000,
    turnsMs: quick ? 5000 : 30_000,
    fanOut: !quick,
  });
}

export async function runStoreScale(options: ScaleOptions) {
  const cluster = await startPostgresCluster({ settings: SETTINGS });
  try {
    const admin = await connect(cluster.url());
    const server = {
      version: (await admin.query('SHOW server_version')).rows[0].server_version,
      settings: Object.fromEntries(
        (
          await admin.query(
            `SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1) ORDER BY name`,
            [
              [
                'fsync',
                'synchronous_commit',
                'max_connections',
                'shared_buffers',
                'max_wal_size',
                'wal_level',
                'checkpoint_timeout',
                'autovacuum',
                'work_mem',
              ],
            ],
          )
        ).rows.map((r) => [r.name, r.unit ? `${r.setting} ${r.unit}` : r.setting]),
      ),
    };
    await admin.end();
    const results = [];
    for (const size of options.sizes) results.push(await oneSize(cluster, size, options));
    const fleetSizes = options.fanOut ? await fleetKnee(cluster, FLEET_SIZES, options.fleetMs) : null;
    const fanOut = options.fanOut ? await fanOutSweep(cluster) : null;
    return {
      bench: 'store-scale',
      leaseMs: LEASE_MS,
      workers: options.workers,
      stores: STORES,
      connections: STORES * 10,
      concurrency: CONCURRENCY,
      server,
      sizes: results,
      fleetSizes,
      fanOut,
    };
  } finally {
    await cluster.remove();
  }
}

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

/** A database of its own on the cluster, STORES stores and an admin connection on it; drop() closes them and drops it. */
async function benchDatabase(cluster: PostgresCluster, database: string) {
  const url = await cluster.createDatabase(database);
  const stores: Store[] = [];
  for (let i = 0; i < STORES; i++)
    stores.push(await openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY }));
  const admin = await connect(url);
  const drop = async () => {
    await admin.end();
    for (const s of stores) await s.close();
    const root = await connect(cluster.url());
    await root.query(`DROP DATABASE ${database} WITH (FORCE)`);
    await root.end();
  };
  return { url, stores, admin, drop };
}

async function oneSize(cluster: PostgresCluster, size: number, options: ScaleOptions) {
  const { url, stores, admin, drop } = await benchDatabase(cluster, `bench_scale_${size}`);
  try {
    await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const store = stores[0]!;
    await createBenchAgent(store, AGENT);
    const workerIds = workerNames(options.workers);
    let t0 = performance.now();
    await registerWorkers(stores, workerIds, 1);
    const registerMs = performance.now() - t0;
    const runnable = size / 10;
    const busy = Math.min(options.workers, runnable);
    t0 = performance.now();
    await seedSessions(url, {
      sessions: size,
      runnable,
      busy,
      workerIds,
      agent: AGENT,
      now: store.clock.now(),
    });
    const seedMs = performance.now() - t0;
    const databaseMiB = Number(
      (await admin.query('SELECT pg_database_size(current_database()) AS b')).rows[0].b / 2 ** 20,
    );
    progress(`${size}: seeded in ${Math.round(seedMs / 1000)} s; baselines`);
    // Before any load: every worker alive and holding its busy session, as in steady state.
    const baseline = await baselines(admin, store);
    await admin.query('SELECT pg_stat_statements_reset()');
    const server = await ServerCounters.open(admin);
    // Rows fresh again after the baselines: the fleet starts from live workers.
    await freshenWorkers(admin);
    progress(`${size}: fleet of ${options.workers}`);

    const fleet = new Fleet({ workerIds, stores, leaseMs: LEASE_MS, log: newLoadLog() });
    fleet.start();
    let mark = await server.read();
    await sleep(options.fleetMs);
    let end = await server.read();
    const fleetPhase = phaseFigures(fleet.log, mark, end, options.workers);
    // Nearly every write of this phase is a renewal: what one costs in WAL.
    const renewals = fleet.log.latencies.get('renewWorker')?.length ?? 0;
    const walBytesPerRenewal = renewals === 0 ? null : Math.round(fleetPhase.walBytes / renewals);

    progress(`${size}: turns`);
    fleet.log = newLoadLog();
    mark = await server.read();
    const until = performance.now() + options.turnsMs;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (performance.now() < until) {
          const workerId = workerIds[Math.floor(Math.random() * workerIds.length)]!;
          if (!(await fleet.turn(workerId, 0, AGENT))) await sleep(50);
        }
      }),
    );
    end = await server.read();
    const turnsPhase = phaseFigures(fleet.log, mark, end, options.workers);

    progress(`${size}: dead workers`);
    fleet.log = newLoadLog();
    mark = await server.read();
    const dead = workerIds.filter((_, i) => i % 100 === 0 && i < busy);
    for (const id of dead) fleet.kill(id);
    await sleep(LEASE_MS + 3 * (LEASE_MS / 5));
    end = await server.read();
    const deadPhase = deadWorkerFigures(fleet.log, dead.length, mark, end);
    await fleet.stop();

    // A lease after the fleet stopped, every row is stale: one sweep takes all their leases over.
    await sleep(LEASE_MS + 1000);
    t0 = performance.now();
    const reclaimed = await store.reclaimExpiredLeases(store.clock.now());
    const reclaimAll = { sessions: reclaimed.length, ms: Math.round(performance.now() - t0) };

    progress(`${size}: calls alone`);
    const ops = await quietOps(store, admin, size);
    const statements = await statementTimes(admin);
    const notify = await notifyFanOut(url, store, LISTENERS, 20);
    return {
      sessions: size,
      runnable,
      busy,
      registerWorkersMs: Math.round(registerMs),
      seedMs: Math.round(seedMs),
      databaseMiB: Math.round(databaseMiB),
      fleet: { ...fleetPhase, walBytesPerRenewal },
      turns: { ...turnsPhase, concurrency: CONCURRENCY },
      deadWorkers: deadPhase,
      reclaimAll,
      ops,
      statements,
      baseline,
      notify,
    };
  } finally {
    await drop();
  }
}

/** Every worker row renewed now (setup, not a berth call): a phase starts from live workers. */
async function freshenWorkers(admin: pg.Client): Promise<void> {
  await admin.query(
    'UPDATE workers SET heartbeat_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint',
  );
}

/** The benchmark's progress, on stderr (its result is the JSON on stdout). */
function progress(line: string): void {
  process.stderr.write(`store-scale: ${line}\n`);
}

function workerNames(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `bw${String(i).padStart(5, '0')}`);
}

/**
 * Where the fleet falls behind on this machine: renewals and sweeps only (no sessions held),
 * for `seconds` at each size, on a database of its own; rows are made fresh before each.
 */
async function fleetKnee(cluster: PostgresCluster, sizes: number[], ms: number) {
  const { url, stores, admin, drop } = await benchDatabase(cluster, 'bench_scale_knee');
  try {
    const workerIds = workerNames(Math.max(...sizes));
    await createBenchAgent(stores[0]!, AGENT);
    await registerWorkers(stores, workerIds, 1);
    await seedSessions(url, { sessions: 10_000, runnable: 1000, busy: 0, workerIds, agent: AGENT, now: 0 });
    const server = await ServerCounters.open(admin);
    const results = [];
    for (const workers of sizes) {
      await freshenWorkers(admin);
      progress(`fleet of ${workers}`);
      const fleet = new Fleet({
        workerIds: workerIds.slice(0, workers),
        stores,
        leaseMs: LEASE_MS,
        log: newLoadLog(),
      });
      const mark = await server.read();
      fleet.start();
      await sleep(ms);
      const end = await server.read();
      const figures = phaseFigures(fleet.log, mark, end, workers);
      await fleet.stop();
      results.push({
        workers,
        targetRenewalsPerSecond: workers / (LEASE_MS / 5 / 1000),
        renewalsPerSecond: figures.renewalsPerSecond,
        renewMs: figures.renewMs,
        renewIntervalMs: figures.renewIntervalMs,
        sweepMs: figures.sweepMs,
        serverCpuPercent: figures.serverCpuPercent,
        benchCpuPercent: figures.benchCpuPercent,
        walBytesPerSecond: figures.walBytesPerSecond,
        errors: figures.errors,
      });
    }
    return results;
  } finally {
    await drop();
  }
}

/** Counters of the server: WAL written, write transactions, CPU of the postmaster and its children. */
class ServerCounters {
  private constructor(
    private readonly client: pg.Client,
    private readonly postmaster: number,
  ) {}

  static async open(client: pg.Client): Promise<ServerCounters> {
    const dir = (await client.query('SHOW data_directory')).rows[0].data_directory as string;
    const pid = Number((await readFile(`${dir}/postmaster.pid`, 'utf8')).split('\n')[0]);
    return new ServerCounters(client, pid);
  }

  /** The counters now; `at` is when they were all read. */
  async read() {
    // WAL written: the insert position moved; write transactions: xids handed out (both exact,
    // unlike the statistics views, which are flushed lazily).
    const { rows } = await this.client.query(
      `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0') AS wal, pg_snapshot_xmax(pg_current_snapshot()) AS xid`,
    );
    const serverCpuMs = await this.cpuMs();
    const cpu = process.cpuUsage();
    return {
      at: performance.now(),
      walBytes: Number(rows[0].wal),
      writes: Number(rows[0].xid),
      serverCpuMs,
      benchCpuMs: (cpu.user + cpu.system) / 1000,
    };
  }

  /**
   * CPU of the server: its processes (the postmaster's children, from /proc) and those it
   * reaped (the postmaster's children's time), ms (clock ticks of 10 ms). The postmaster is
   * read last: a child that exits meanwhile is counted twice in this sample, not in neither.
   */
  private async cpuMs(): Promise<number> {
    const children = await readFile(`/proc/${this.postmaster}/task/${this.postmaster}/children`, 'utf8');
    let ticks = 0;
    for (const pid of children.split(' ').filter((p) => p !== '')) {
      const fields = await statFields(Number(pid));
      // [11], [12] = utime, stime
      if (fields) ticks += Number(fields[11]) + Number(fields[12]);
    }
    const own = (await statFields(this.postmaster))!;
    // [11]..[14] = utime, stime, cutime, cstime
    ticks += Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
    return ticks * 10;
  }
}

/** The fields of /proc/<pid>/stat after the command name (from the state on), or null when it is gone. */
async function statFields(pid: number): Promise<string[] | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  return stat === null ? null : stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

type Counters = Awaited<ReturnType<ServerCounters['read']>>;

function perSecond(n: number, ms: number) {
  return Math.round((n / ms) * 1000);
}

function resources(from: Counters, to: Counters) {
  const ms = to.at - from.at;
  return {
    seconds: round(ms / 1000),
    walBytesPerSecond: perSecond(to.walBytes - from.walBytes, ms),
    writeTransactionsPerSecond: perSecond(to.writes - from.writes, ms),
    serverCpuPercent: Math.round(((to.serverCpuMs - from.serverCpuMs) / ms) * 100),
    benchCpuPercent: Math.round(((to.benchCpuMs - from.benchCpuMs) / ms) * 100),
    walBytes: to.walBytes - from.walBytes,
  };
}

function latency(log: LoadLog, name: string) {
  const samples = log.latencies.get(name) ?? [];
  return samples.length === 0 ? null : stats(samples);
}

/** What a phase of `workers` workers did: renewals against their target (one per worker per leaseMs / 5), and every call's latency. */
function phaseFigures(log: LoadLog, from: Counters, to: Counters, workers: number) {
  return {
    ...resources(from, to),
    targetRenewalsPerSecond: workers / (LEASE_MS / 5 / 1000),
    renewalsPerSecond: perSecond(log.latencies.get('renewWorker')?.length ?? 0, to.at - from.at),
    renewMs: latency(log, 'renewWorker'),
    renewIntervalMs: log.renewIntervals.length === 0 ? null : stats(log.renewIntervals),
    sweepsPerSecond: perSecond(log.latencies.get('reclaimExpiredLeases')?.length ?? 0, to.at - from.at),
    sweepMs: latency(log, 'reclaimExpiredLeases'),
    claimsPerSecond: perSecond(log.claims.length, to.at - from.at),
    claimMs: latency(log, 'claimRunnableSession'),
    startTurnMs: latency(log, 'startTurn'),
    commitTurnMs: latency(log, 'commitTurn'),
    releaseMs: latency(log, 'releaseSession'),
    enqueueMs: latency(log, 'enqueueMessage'),
    lostRenewals: log.lostRenewals.length,
    staleCalls: log.staleCalls.length,
    errors: log.errors.length,
    firstErrors: log.errors.slice(0, 3),
  };
}

/** The sweeps that took sessions over: how many each took, and what they cost beside the empty ones. */
function deadWorkerFigures(log: LoadLog, killed: number, from: Counters, to: Counters) {
  const reclaimed = log.reclaims.reduce((n, r) => n + r.sessionIds.length, 0);
  return {
    ...resources(from, to),
    killedWorkers: killed,
    reclaimedSessions: reclaimed,
    renewMs: latency(log, 'renewWorker'),
    reclaimingSweeps: log.reclaims.length,
    reclaimingSweepMs: log.reclaims.length === 0 ? null : stats(log.reclaims.map((r) => r.ms)),
    sessionsPerReclaimingSweep:
      log.reclaims.length === 0 ? null : stats(log.reclaims.map((r) => r.sessionIds.length)),
    sweepMs: latency(log, 'reclaimExpiredLeases'),
    errors: log.errors.length,
  };
}

/** Each store call alone: one caller, nothing else running. */
async function quietOps(store: Store, admin: pg.Client, size: number) {
  const now = () => store.clock.now();
  const probe = 'bench-probe';
  await store.registerWorker({
    id: probe,
    host: 'bench',
    pid: 0,
    slots: 1,
    heartbeatAt: now(),
    startedAt: now(),
  });
  const depth = await store.queueDepth(now());
  const at = async (offset: number) => {
    const { rows } = await admin.query(
      `SELECT id FROM sessions WHERE lease_owner IS NULL AND queued_id IS NOT NULL AND runnable_at <= $1
       ORDER BY queued_id OFFSET $2 LIMIT 1`,
      [now(), offset],
    );
    const id = rows[0].id as string;
    return {
      expectedPosition: offset + 1,
      position: (await store.getSessionView(id, now()))?.queuePosition ?? null,
      viewMs: await timeEach(30, () => store.getSessionView(id, now())),
    };
  };
  // One claim cycle, each call timed on its own.
  const cycle: Record<string, number[]> = {};
  const timedCall = async <T>(name: string, call: () => Promise<T>) => {
    const t0 = performance.now();
    const value = await call();
    cycle[name] = [...(cycle[name] ?? []), performance.now() - t0];
    return value;
  };
  for (let i = 0; i < 30; i++) {
    await timedCall('renewWorker', () => store.renewWorker(probe, now()));
    const claim = await timedCall('claimRunnableSession', () => store.claimRunnableSession(probe, now()));
    if (!claim) throw new Error('quietOps: nothing to claim');
    const fence = { sessionId: claim.session.id, generation: claim.session.generation, workerId: probe };
    const started = await timedCall('startTurn', () => store.startTurn(fence, now()));
    const turn = started.code === 'ok' ? started.value?.turn : undefined;
    if (turn)
      await timedCall('commitTurn', () =>
        store.commitTurn({ ...fence, turnId: turn.id, outputs: [{ text: 'done' }] }, now()),
      );
    await timedCall('releaseSession', () => store.releaseSession(fence, now()));
    await timedCall('enqueueMessage', () =>
      store.enqueueMessage({ sessionId: fence.sessionId, text: 'next', now: now() }),
    );
  }
  const listT0 = performance.now();
  const listed = size <= 100_000 ? await store.listSessionViews(now()) : null;
  const listMs = performance.now() - listT0;
  return {
    queueDepth: depth,
    positionAt: { head: await at(0), middle: await at(Math.floor(depth / 2)), tail: await at(depth - 1) },
    queueDepthMs: await timeEach(30, () => store.queueDepth(now())),
    sweepMs: await timeEach(30, () => store.reclaimExpiredLeases(now())),
    renewMs: await timeEach(30, () => store.renewWorker(probe, now())),
    etaMs: await timeEach(30, async () => {
      await store.meanTurnMs(50);
      await store.liveSlots(now());
    }),
    cycleMs: Object.fromEntries(Object.entries(cycle).map(([name, samples]) => [name, stats(samples)])),
    listSessionViews: listed === null ? null : { sessions: listed.length, ms: Math.round(listMs) },
  };
}

/** pg_stat_statements for the store's statements, by their names. */
async function statementTimes(admin: pg.Client) {
  const byText = new Map<string, string>();
  for (const [name, sql] of Object.entries({ ...shared, ...POSTGRES_STATEMENTS }))
    if (typeof sql === 'string') byText.set(fingerprint(sql), name);
  const { rows } = await admin.query(
    'SELECT query, calls, total_exec_time, mean_exec_time FROM pg_stat_statements ORDER BY total_exec_time DESC',
  );
  const out: Record<string, { calls: number; meanMs: number; totalMs: number }> = {};
  for (const r of rows) {
    const name = byText.get(fingerprint(r.query));
    if (!name) continue;
    out[name] = {
      calls: Number(r.calls),
      meanMs: round(Number(r.mean_exec_time) * 100) / 100,
      totalMs: Math.round(Number(r.total_exec_time)),
    };
  }
  return out;
}

/** A statement's text with every literal and parameter blanked, as pg_stat_statements shows it or the store sends it. */
function fingerprint(sql: string): string {
  return sql
    .replace(/'[^']*'/g, '?')
    .replace(/(?<!:):[A-Za-z_]\w*/g, '?')
    .replace(/\$\d+/g, '?')
    .replace(/\b\d+\b/g, '?')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The statements before the queue keys, verbatim (3b53052), and their replacements, timed the same way on the same data. */
const OLD_QUEUE = `
WITH firsts AS (
  SELECT session_id, MIN(id) AS first_id FROM messages
  WHERE status = 'pending' AND direction = 'in' AND process_after <= $1
  GROUP BY session_id
)
SELECT f.session_id, f.first_id, s.lease_owner FROM firsts f
JOIN sessions s ON s.id = f.session_id
LEFT JOIN workers w ON w.id = s.lease_owner
WHERE s.lease_owner IS NULL OR w.id IS NULL OR w.heartbeat_at <= $2
ORDER BY f.first_id`;
const OLD_EXPIRED_LEASES = `
SELECT s.id FROM sessions s LEFT JOIN workers w ON w.id = s.lease_owner
WHERE s.lease_owner IS NOT NULL AND (w.id IS NULL OR w.heartbeat_at <= $1)
ORDER BY s.id FOR NO KEY UPDATE OF s SKIP LOCKED`;
const OLD_DELETE_DEAD_WORKERS = `
DELETE FROM workers WHERE heartbeat_at <= $1 AND id NOT IN (SELECT lease_owner FROM sessions WHERE lease_owner IS NOT NULL)`;
const OLD_MEAN_TURN_MS = `
SELECT AVG(ended_at - started_at) AS ms FROM (
  SELECT started_at, ended_at FROM turns WHERE status = 'committed' ORDER BY ended_at DESC LIMIT 50
) AS recent`;

async function baselines(admin: pg.Client, store: Store) {
  const now = store.clock.now();
  const stale = now - LEASE_MS;
  const inRolledBack = (statements: [string, unknown[]][]) => async () => {
    await admin.query('BEGIN');
    try {
      for (const [sql, params] of statements) await admin.query(sql, params);
    } finally {
      await admin.query('ROLLBACK');
    }
  };
  /** A store statement as the store sends it: positional, its values from named parameters. */
  const named = (sql: string, params: Record<string, unknown>): [string, unknown[]] => {
    const statement = toPositional(sql);
    return [statement.text, positionalValues(statement, params)];
  };
  const tailKey = Number(
    (
      await admin.query(
        'SELECT max(queued_id) AS k FROM sessions WHERE lease_owner IS NULL AND runnable_at <= $1',
        [now],
      )
    ).rows[0].k,
  );
  return {
    positionMs: {
      before: await timeEach(5, () => admin.query(OLD_QUEUE, [now, stale])),
      after: await timeEach(5, () =>
        admin.query(...named(shared.QUEUED_BEFORE, { now, before: tailKey, staleBefore: stale })),
      ),
    },
    claimHeadMs: {
      before: await timeEach(
        5,
        inRolledBack([[`${OLD_QUEUE} LIMIT 1 FOR NO KEY UPDATE OF s SKIP LOCKED`, [now, stale]]]),
      ),
      after: await timeEach(
        5,
        inRolledBack([
          named(POSTGRES_STATEMENTS.QUEUE_HEAD, { now }),
          named(POSTGRES_STATEMENTS.DEAD_HELD_QUEUE_HEAD, { now, staleBefore: stale }),
        ]),
      ),
    },
    // A pass when nothing expired: before, the statements every pass ran; after, the read
    // every pass now runs (its first, which reads every stale row), and for reference the
    // statements a pass with something due runs.
    sweepMs: {
      before: await timeEach(
        5,
        inRolledBack([
          [OLD_EXPIRED_LEASES, [stale]],
          [OLD_DELETE_DEAD_WORKERS, [now - 10 * LEASE_MS]],
        ]),
      ),
      after: await timeEach(5, () =>
        admin.query(
          ...named(shared.SWEEP_DUE, {
            checkedUpTo: -1,
            staleBefore: stale,
            deadBefore: now - 10 * LEASE_MS,
          }),
        ),
      ),
      afterWhenDue: await timeEach(
        5,
        inRolledBack([
          named(POSTGRES_STATEMENTS.EXPIRED_LEASES_LOCKED, { staleBefore: stale, limit: 100 }),
          named(shared.DELETE_DEAD_WORKERS, { deadBefore: now - 10 * LEASE_MS }),
        ]),
      ),
    },
    etaSlotsMs: {
      before: await timeEach(5, async () =>
        (await store.listWorkers())
          .filter((w) => now - w.heartbeatAt < LEASE_MS)
          .reduce((n, w) => n + w.slots, 0),
      ),
      after: await timeEach(5, () => store.liveSlots(now)),
    },
    meanTurnMs: {
      before: await timeEach(
        5,
        inRolledBack([
          ['DROP INDEX turns_committed', []],
          [OLD_MEAN_TURN_MS, []],
        ]),
      ),
      after: await timeEach(5, () => admin.query(OLD_MEAN_TURN_MS)),
    },
  };
}

/** `listeners` connections LISTENing on the store's channel; each of `rounds` enqueues is timed to every one of them. */
async function notifyFanOut(url: string, store: Store, listeners: number, rounds: number) {
  const clients: pg.Client[] = [];
  let expected: { at: number; got: number[]; done: () => void } | null = null;
  try {
    for (let i = 0; i < listeners; i++) {
      const client = await connect(url);
      client.on('notification', () => {
        if (expected) {
          expected.got.push(performance.now() - expected.at);
          if (expected.got.length === listeners) expected.done();
        }
      });
      await client.query(`LISTEN ${CHANNEL}`);
      clients.push(client);
    }
    const all: number[] = [];
    const last: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const at = performance.now();
      const received = new Promise<void>((done) => {
        expected = { at, got: [], done };
      });
      await store.enqueueMessage({ sessionId: sessionId(3 + r), text: 'ping', now: store.clock.now() });
      await Promise.race([received, sleep(10_000)]);
      const got = expected!.got;
      expected = null;
      all.push(...got);
      if (got.length === listeners) last.push(Math.max(...got));
    }
    return { listeners, rounds, complete: last.length, latencyMs: stats(all), lastListenerMs: stats(last) };
  } finally {
    for (const c of clients) await c.end().catch(() => undefined);
  }
}

/** Fan-out at several listener counts, and what NOTIFY costs a commit under concurrency. */
async function fanOutSweep(cluster: PostgresCluster) {
  const url = await cluster.createDatabase('bench_scale_notify');
  const store = await openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY });
  try {
    await createBenchAgent(store, AGENT);
    for (let i = 1; i <= 30; i++)
      await store.enqueueMessage({
        sessionId: sessionId(i),
        agent: AGENT,
        text: 'x',
        now: store.clock.now(),
      });
    const byListeners = [];
    for (const n of FAN_OUT_LISTENERS) byListeners.push(await notifyFanOut(url, store, n, 20));
    return { byListeners, commitsPerSecond: await notifyingCommits(url) };
  } finally {
    await store.close();
  }
}

/** Commits/s of CONCURRENCY clients each inserting a row per transaction, with and without a NOTIFY in it. */
async function notifyingCommits(url: string) {
  const setup = await connect(url);
  await setup.query(
    'CREATE TABLE IF NOT EXISTS bench_commits (id BIGSERIAL PRIMARY KEY, at BIGINT NOT NULL)',
  );
  await setup.end();
  const rate = async (notify: boolean) => {
    const clients = await Promise.all(Array.from({ length: CONCURRENCY }, () => connect(url)));
    const until = performance.now() + 5000;
    let commits = 0;
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (c) => {
        while (performance.now() < until) {
          await c.query('BEGIN');
          await c.query('INSERT INTO bench_commits (at) VALUES ($1)', [Date.now()]);
          if (notify) await c.query('SELECT pg_notify($1, $2)', ['bench_commits', 'x']);
          await c.query('COMMIT');
          commits++;
        }
      }),
    );
    const ms = performance.now() - t0;
    await Promise.all(clients.map((c) => c.end()));
    return perSecond(commits, ms);
  };
  return { clients: CONCURRENCY, plain: await rate(false), notifying: await rate(true) };
}
