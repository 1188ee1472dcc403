/**
 * A throw-away highly available PostgreSQL for tests and chaos runs: one etcd (Debian's
 * etcd-server 3.4, Patroni's `etcd3:` API: 3.4 has v2 off) and two or three Patroni members
 * (Debian's patroni 3.0) over the installed PostgreSQL, with synchronous replication, so a
 * commit acknowledged by the primary is on the standby Patroni promotes when the primary
 * dies. Everything lives under one temp dir and in the run's network namespaces
 * (cluster-network.ts): each member in a namespace of its own, so it can be cut off.
 *
 * Settings (measured on this kind of machine, see docs/store.md): `synchronous_mode: true`;
 * `primary_start_timeout: 0`, or a killed primary's postmaster is restarted in place (for
 * 300 s by default) instead of failing over; `ttl: 10`, `loop_wait: 1`, `retry_timeout: 3`;
 * `use_pg_rewind` with data checksums, so a demoted primary rejoins as a replica. Patroni
 * runs as `postgres` (setpriv; PostgreSQL refuses root) with an explicit `pgpass:` in the
 * temp dir, not the postgres user's home.
 *
 * Invariants:
 * - `remove` leaves nothing: every process in the namespaces is SIGKILLed (etcd, Patroni,
 *   each PostgreSQL and its children), the namespaces and the temp dir are deleted.
 *   Clusters of dead runs are reaped at start.
 * - Every wait is bounded; a start that does not reach a leader with a synchronous
 *   standby fails with the members' log tails.
 * - Needs root, `ip`, `nsenter`, `setpriv`, `patroni`, `etcd`: `requirePatroni` fails
 *   with the fix otherwise.
 */
import { execFile, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { chown, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { type ClusterNetwork, createClusterNetwork, reapStaleClusterNetworks } from './cluster-network.js';
import { isStaleRun, killNamespaceProcesses, ownRunId } from './netns.js';
import { createDatabaseOn, postgresBinDir } from './postgres-cluster.js';

const run = promisify(execFile);
const SUPERUSER = 'berth';
const PG_PORT = 5432;
const API_PORT = 8008;
const ETCD_CLIENT_PORT = 2379;
const ETCD_PEER_PORT = 2380;
const START_TIMEOUT_MS = 90_000;
const POLL_MS = 100;
const REST_TIMEOUT_MS = 1000;
/** `<tmpdir>/berth-patroni-<run>-XXXXXX`: the run id says whose it is. */
const TEMP_PREFIX = 'berth-patroni-';

export interface PatroniClusterOptions {
  /** Members: a primary and its synchronous standby, or one more replica. @default 2 */
  members?: 2 | 3;
  /**
   * Synchronous replication (`synchronous_mode: true`). Off only to measure what
   * asynchronous replication loses at a failover. @default true
   */
  synchronous?: boolean;
}

export interface PatroniMemberStatus {
  name: string;
  role: 'leader' | 'sync_standby' | 'replica' | string;
  state: string;
}

export interface PatroniCluster {
  /** Member names, `pg1`, `pg2`, …, in the multi-host URL's order. */
  readonly members: readonly string[];
  /** The multi-host URL of a database (default `postgres`): every member (or these, in this order), `target_session_attrs=read-write`. */
  url(database?: string, members?: readonly string[]): string;
  /** A single-host URL of one member (to look at it alone). */
  memberUrl(member: string, database?: string): string;
  /** Creates an empty database on the primary (replicated to the others) and returns its multi-host URL. */
  createDatabase(name: string): Promise<string>;
  /** What Patroni says of each member, from any member that answers. */
  status(): Promise<PatroniMemberStatus[]>;
  /** The leader, per Patroni; null while there is none. */
  primary(): Promise<string | null>;
  /**
   * Waits until a member other than `notMember` leads, writable, with a streaming standby
   * (synchronous, unless `synchronous` was off; none with `standby: false`). Returns the leader.
   */
  waitForLeader(options?: { notMember?: string; standby?: boolean; timeoutMs?: number }): Promise<string>;
  /** A planned switchover (Patroni's REST API) to `candidate`: the primary is demoted and restarted as a replica. */
  switchover(candidate: string): Promise<void>;
  /** When `member`'s PostgreSQL last left recovery as the primary (from its server log), epoch ms; null if it never did. */
  promotedAt(member: string): Promise<number | null>;
  /** SIGKILLs the primary's postmaster (Patroni lives on and fails over). Returns the member and when. */
  killPrimaryPostmaster(): Promise<{ member: string; at: number }>;
  /** The machine is lost: its link is cut first (no reset reaches anyone), then Patroni and PostgreSQL are SIGKILLed. */
  killMember(member: string): Promise<{ at: number }>;
  /** Takes the member's link down (a partition); its processes live on. */
  cut(member: string): Promise<void>;
  /** Limits what reaches the member to `kbitPerSecond` (null: no limit): a standby fed slower than the primary writes lags. */
  throttle(member: string, kbitPerSecond: number | null): Promise<void>;
  heal(member: string): Promise<void>;
  /** Heals a killed member's link and starts its Patroni again: it rejoins as a replica (pg_rewind). */
  startMember(member: string): Promise<void>;
  /** Kills everything and deletes the namespaces and the temp dir. Idempotent. */
  remove(): Promise<void>;
}

/** Fails with one line saying what is missing. */
export async function requirePatroni(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('a Patroni cluster needs root (network namespaces, setpriv)');
  for (const [tool, args] of [
    ['patroni', ['--version']],
    ['etcd', ['--version']],
    ['setpriv', ['--version']],
    ['nsenter', ['--version']],
    ['ip', ['-V']],
  ] as const) {
    await run(tool, [...args]).catch(() => {
      throw new Error(
        `${tool} not found: install Patroni and etcd with bash scripts/ensure-patroni.sh (apt-get install --no-upgrade patroni etcd-server)`,
      );
    });
  }
}

export async function startPatroniCluster(options: PatroniClusterOptions = {}): Promise<PatroniCluster> {
  await requirePatroni();
  await reapStaleClusterNetworks();
  await reapStaleTempDirs();
  const count = options.members ?? 2;
  const synchronous = options.synchronous ?? true;
  const bin = await postgresBinDir();
  const dir = await mkdtemp(join(tmpdir(), `${TEMP_PREFIX}${ownRunId()}-`));
  const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
  let net: ClusterNetwork | null = null;
  let removed = false;
  const remove = async () => {
    if (removed) return;
    removed = true;
    await net?.remove();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    net = await createClusterNetwork(count);
    const network = net;
    const names = network.members.map((_, i) => `pg${i + 1}`);
    const memberOf = (name: string) => {
      const i = names.indexOf(name);
      if (i < 0) throw new Error(`no member ${name} (members: ${names.join(', ')})`);
      return { i, net: network.members[i]!, dir: join(dir, name) };
    };
    const etcdUrl = `http://${network.switchAddress}:${ETCD_CLIENT_PORT}`;
    startDaemon(
      network.switchPath,
      [
        'etcd',
        '--name',
        'etcd',
        '--data-dir',
        join(dir, 'etcd'),
        '--listen-client-urls',
        etcdUrl,
        '--advertise-client-urls',
        etcdUrl,
        '--listen-peer-urls',
        `http://127.0.0.1:${ETCD_PEER_PORT}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${ETCD_PEER_PORT}`,
        '--initial-cluster',
        `etcd=http://127.0.0.1:${ETCD_PEER_PORT}`,
      ],
      join(dir, 'etcd.log'),
    );
    await chown(dir, uid, gid);
    for (const name of names) {
      const m = memberOf(name);
      await mkdir(m.dir, { mode: 0o700 });
      await writeFile(
        join(m.dir, 'patroni.yml'),
        JSON.stringify(
          patroniConfig({
            scope: `berth-${ownRunId()}`,
            name,
            address: m.net.address,
            dir: m.dir,
            bin,
            etcd: `${network.switchAddress}:${ETCD_CLIENT_PORT}`,
            synchronous,
          }),
          null,
          2,
        ),
      );
      await chown(m.dir, uid, gid);
      await chown(join(m.dir, 'patroni.yml'), uid, gid);
    }
    await waitFor(
      () =>
        fetch(`${etcdUrl}/health`, { signal: AbortSignal.timeout(REST_TIMEOUT_MS) }).then(
          (r) => r.ok,
          () => false,
        ),
      START_TIMEOUT_MS,
      async () => `etcd did not answer on ${etcdUrl}: ${await tail(join(dir, 'etcd.log'))}`,
    );
    const startPatroni = (name: string) => {
      const m = memberOf(name);
      startDaemon(
        m.net.path,
        [
          'setpriv',
          `--reuid=${uid}`,
          `--regid=${gid}`,
          '--init-groups',
          '--',
          'patroni',
          join(m.dir, 'patroni.yml'),
        ],
        join(m.dir, 'patroni.log'),
        {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: m.dir,
          LANG: 'C.UTF-8',
          PGPASSFILE: join(m.dir, 'pgpass'),
        },
      );
    };
    // The first member bootstraps alone; the others then clone it (pg_basebackup).
    startPatroni(names[0]!);
    const hostUrl = (name: string, database = 'postgres') =>
      `postgres://${SUPERUSER}@${memberOf(name).net.address}:${PG_PORT}/${database}`;
    const url = (database = 'postgres', members: readonly string[] = names) =>
      `postgres://${SUPERUSER}@${members.map((n) => `${memberOf(n).net.address}:${PG_PORT}`).join(',')}/${database}?target_session_attrs=read-write`;

    const status = async (): Promise<PatroniMemberStatus[]> => {
      const answers = network.members.map(async (m) => {
        const r = await fetch(`http://${m.address}:${API_PORT}/cluster`, {
          signal: AbortSignal.timeout(REST_TIMEOUT_MS),
        });
        if (!r.ok) throw new Error(`HTTP ${r.status}`);
        return ((await r.json()) as { members: PatroniMemberStatus[] }).members;
      });
      return Promise.any(answers).catch(() => []);
    };
    const primary = async () =>
      (await status()).find((s) => s.role === 'leader' && s.state === 'running')?.name ?? null;
    const logs = async () =>
      (
        await Promise.all(
          names.map(async (n) => `--- ${n}:\n${await tail(join(memberOf(n).dir, 'patroni.log'))}`),
        )
      ).join('\n');
    const waitForLeader: PatroniCluster['waitForLeader'] = async (o = {}) => {
      let leader: string | null = null;
      const wantStandby = o.standby !== false;
      // Patroni promotes only the standby its DCS names synchronous (asynchronous: any running replica).
      const standbyRole = synchronous ? 'sync_standby' : 'replica';
      await waitFor(
        async () => {
          const members = await status();
          leader = members.find((s) => s.role === 'leader' && s.state === 'running')?.name ?? null;
          if (!leader || leader === o.notMember) return false;
          if (wantStandby && !members.some((s) => s.role === standbyRole && s.state === 'running'))
            return false;
          return leaderReady(hostUrl(leader), wantStandby ? (synchronous ? 'sync' : 'async') : null);
        },
        o.timeoutMs ?? START_TIMEOUT_MS,
        async () =>
          `no writable leader${o.notMember ? ` other than ${o.notMember}` : ''}${wantStandby ? ` with a streaming ${standbyRole}` : ''} ` +
          `(Patroni says ${JSON.stringify(await status())}). Logs:\n${await logs()}`,
      );
      return leader!;
    };
    await waitForLeader({ standby: false });
    for (const name of names.slice(1)) startPatroni(name);
    await waitForLeader();

    const killMember = async (name: string) => {
      const m = memberOf(name);
      await m.net.cut();
      const at = Date.now();
      await killNamespaceProcesses(m.net.namespace);
      return { at };
    };
    return {
      members: names,
      url,
      memberUrl: hostUrl,
      async createDatabase(name) {
        await createDatabaseOn(hostUrl(await waitForLeader({ standby: false })), name);
        return url(name);
      },
      status,
      primary,
      waitForLeader,
      async switchover(candidate) {
        const leader = await waitForLeader();
        const r = await fetch(`http://${memberOf(leader).net.address}:${API_PORT}/switchover`, {
          method: 'POST',
          body: JSON.stringify({ leader, candidate: memberOf(candidate) && candidate }),
          signal: AbortSignal.timeout(START_TIMEOUT_MS),
        });
        if (!r.ok)
          throw new Error(`Patroni switchover ${leader} -> ${candidate}: HTTP ${r.status} ${await r.text()}`);
      },
      async promotedAt(member) {
        const log = await readFile(join(memberOf(member).dir, 'log', 'postgresql.log'), 'utf8').catch(
          () => '',
        );
        const lines = log.split('\n').filter((line) => line.includes('selected new timeline ID'));
        const at = /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC /.exec(lines.at(-1) ?? '')?.[1];
        return at ? Date.parse(`${at.replace(' ', 'T')}Z`) : null;
      },
      async killPrimaryPostmaster() {
        const member = await waitForLeader({ standby: false });
        const pidFile = await readFile(join(memberOf(member).dir, 'data', 'postmaster.pid'), 'utf8');
        const pid = Number(pidFile.split('\n')[0]);
        const at = Date.now();
        process.kill(pid, 'SIGKILL');
        return { member, at };
      },
      killMember,
      cut: (name) => memberOf(name).net.cut(),
      throttle: (name, kbit) => memberOf(name).net.throttle(kbit),
      heal: (name) => memberOf(name).net.heal(),
      async startMember(name) {
        await memberOf(name).net.heal();
        await killNamespaceProcesses(memberOf(name).net.namespace);
        startPatroni(name);
      },
      remove,
    };
  } catch (err) {
    await remove();
    throw err;
  }
}

interface MemberConfig {
  scope: string;
  name: string;
  address: string;
  dir: string;
  bin: string;
  etcd: string;
  synchronous: boolean;
}

function patroniConfig(c: MemberConfig): object {
  return {
    scope: c.scope,
    name: c.name,
    log: { level: 'INFO' },
    restapi: { listen: `${c.address}:${API_PORT}`, connect_address: `${c.address}:${API_PORT}` },
    etcd3: { hosts: [c.etcd] },
    bootstrap: {
      dcs: {
        ttl: 10,
        loop_wait: 1,
        retry_timeout: 3,
        primary_start_timeout: 0,
        synchronous_mode: c.synchronous,
        maximum_lag_on_failover: 1024 * 1024 * 1024,
        postgresql: {
          use_pg_rewind: true,
          use_slots: true,
          parameters: { max_connections: 300, wal_keep_size: '256MB' },
        },
      },
      initdb: [{ encoding: 'UTF8' }, { locale: 'C' }, 'data-checksums'],
    },
    postgresql: {
      listen: `${c.address},127.0.0.1:${PG_PORT}`,
      connect_address: `${c.address}:${PG_PORT}`,
      data_dir: join(c.dir, 'data'),
      bin_dir: c.bin,
      pgpass: join(c.dir, 'pgpass'),
      // Trust inside the run's private /24 only: a throw-away cluster, nothing secret in it.
      pg_hba: ['local all all trust', 'host all all 0.0.0.0/0 trust', 'host replication all 0.0.0.0/0 trust'],
      authentication: {
        superuser: { username: SUPERUSER },
        replication: { username: 'replicator' },
        rewind: { username: 'rewinder' },
      },
      parameters: {
        unix_socket_directories: c.dir,
        logging_collector: 'on',
        log_directory: join(c.dir, 'log'),
        log_filename: 'postgresql.log',
        // promotedAt reads these times.
        log_line_prefix: '%m [%p] ',
        log_timezone: 'UTC',
      },
    },
  };
}

/** A daemon in a namespace (`nsenter --net`, which execs), its output appended to `logFile`; detached from this process's fate only by `remove`. */
function startDaemon(netnsPath: string, argv: string[], logFile: string, env?: NodeJS.ProcessEnv): void {
  const log = openSync(logFile, 'a');
  const child = spawn('nsenter', [`--net=${netnsPath}`, '--', ...argv], {
    env: env ?? process.env,
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  child.on('error', () => undefined);
  // Their namespaces hold them; they must not keep this process's event loop alive.
  child.unref();
}

/** Deletes the temp dirs of dead runs' clusters (their processes died with their namespaces). */
async function reapStaleTempDirs(): Promise<void> {
  for (const name of await readdir(tmpdir()).catch(() => [] as string[])) {
    const run = name.startsWith(TEMP_PREFIX) ? name.slice(TEMP_PREFIX.length).split('-')[0] : undefined;
    if (isStaleRun(run))
      await rm(join(tmpdir(), name), { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The leader is writable and, if asked, streams to a standby of that sync_state. */
async function leaderReady(url: string, standby: 'sync' | 'async' | null): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: REST_TIMEOUT_MS });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ recovery: boolean; standbys: string }>(
      "SELECT pg_is_in_recovery() AS recovery, (SELECT count(*) FROM pg_stat_replication WHERE sync_state = $1 AND state = 'streaming') AS standbys",
      [standby ?? 'sync'],
    );
    return !rows[0]!.recovery && (!standby || Number(rows[0]!.standbys) > 0);
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function waitFor(
  check: () => Promise<boolean>,
  timeoutMs: number,
  why: () => Promise<string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  throw new Error(`Patroni cluster: ${await why()}`);
}

async function tail(file: string, chars = 1500): Promise<string> {
  return (await readFile(file, 'utf8').catch(() => '(no log)')).slice(-chars);
}
