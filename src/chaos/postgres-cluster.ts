/**
 * A throw-away PostgreSQL cluster for tests and chaos runs: created with Debian's initdb
 * under a temp dir, on a free loopback port, with its socket in that dir, so it never
 * touches the machine's default cluster. initdb and the server refuse to run as root, so
 * as root they run as the `postgres` user (the temp dir is handed to it). `stop`/`start`
 * are a real server stop and start (the chaos run's store restart); `remove` stops it
 * and deletes everything. By default it skips fsync (a throw-away cluster whose host does
 * not crash); `settings` overrides that and any other server setting (the scale benchmark
 * runs durable, with more connections and memory).
 */
import { execFile } from 'node:child_process';
import { chown, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './children.js';

const run = promisify(execFile);
const PG_ROOT = '/usr/lib/postgresql';
const SUPERUSER = 'berth';

export interface PostgresCluster {
  /** Connection string of a database of this cluster (default: the `postgres` database). */
  url(database?: string): string;
  /** Creates a new, empty database and returns its connection string. */
  createDatabase(name: string): Promise<string>;
  /** Fast shutdown: connections are cut, as when the database host restarts. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops the server and deletes its files. Idempotent. */
  remove(): Promise<void>;
}

/** The newest installed server's bin dir; fails with the fix when PostgreSQL is missing. */
export async function postgresBinDir(): Promise<string> {
  const versions = await readdir(PG_ROOT).catch(() => [] as string[]);
  const newest = versions.filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) {
    throw new Error(
      `PostgreSQL server binaries not found under ${PG_ROOT}; install them: bash scripts/setup.sh (apt-get install postgresql)`,
    );
  }
  return join(PG_ROOT, newest, 'bin');
}

/** CREATE DATABASE `name` on the server `serverUrl` connects to. */
export async function createDatabaseOn(serverUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

/** Server settings (`-c name=value`) of a throw-away cluster unless overridden. */
const DEFAULT_SETTINGS: Record<string, string | number> = {
  listen_addresses: '127.0.0.1',
  // A throw-away cluster whose host does not crash; a server stop still writes everything.
  fsync: 'off',
  max_connections: 300,
};

export async function startPostgresCluster(
  options: { settings?: Record<string, string | number> } = {},
): Promise<PostgresCluster> {
  const bin = await postgresBinDir();
  const dir = await mkdtemp(join(tmpdir(), 'berth-pg-'));
  const dataDir = join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    await chown(dir, uid, gid);
  }
  const pgRun = (tool: string, args: string[]) =>
    asRoot
      ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args], { cwd: dir })
      : run(join(bin, tool), args, { cwd: dir });
  await pgRun('initdb', [
    '-D',
    dataDir,
    '-A',
    'trust',
    '-U',
    SUPERUSER,
    '-E',
    'UTF8',
    '--no-locale',
    '--no-sync',
  ]);
  const port = await freePort();
  const settings = Object.entries({ ...DEFAULT_SETTINGS, ...options.settings }).map(
    ([name, value]) => `-c ${name}=${value}`,
  );
  const serverOptions = [`-p ${port}`, `-k ${dir}`, ...settings].join(' ');
  const start = () =>
    pgRun('pg_ctl', [
      '-D',
      dataDir,
      '-l',
      join(dir, 'server.log'),
      '-w',
      '-t',
      '60',
      '-o',
      serverOptions,
      'start',
    ]);
  const stop = () => pgRun('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', '-t', '60', 'stop']);
  await start();
  let running = true;
  const url = (database = 'postgres') => `postgres://${SUPERUSER}@127.0.0.1:${port}/${database}`;
  return {
    url,
    async createDatabase(name) {
      await createDatabaseOn(url(), name);
      return url(name);
    },
    async stop() {
      await stop();
      running = false;
    },
    async start() {
      await start();
      running = true;
    },
    async remove() {
      if (running) await stop().catch(() => undefined);
      running = false;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
