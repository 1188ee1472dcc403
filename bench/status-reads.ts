/**
 * `/v1/status` and the first page of `/v1/sessions` with 100,000 sessions in the store (10 %
 * runnable, 100 running a turn on PostgreSQL), on PostgreSQL (a throw-away cluster) and on
 * SQLite, through the HTTP API (app.inject): p50/p99 of each. Baseline, in the same run on
 * the same data: the read both routes made before, every session's view
 * (listSessionViews without a page), from which the old routes built their answer.
 * `npm run bench -- statusReads`; `--quick`: 10,000 sessions.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { issueToken } from '../src/api/api-tokens.js';
import { buildApp } from '../src/api/index.js';
import { startPostgresCluster } from '../src/chaos/index.js';
import { loadConfig } from '../src/core/index.js';
import { openPostgresStore, openSqliteStore, type Store } from '../src/store/index.js';
import { type BenchOptions, timeEach } from './harness.js';
import { createBenchAgent } from './store-load.js';
import { seedSessions, seedSqliteSessions } from './store-seed.js';

const AGENT = 'b';
const WORKER = 'bench-w';
const ROUNDS = 200;
const BASELINE_ROUNDS = 3;

export async function statusReads({ quick }: BenchOptions) {
  const sessions = quick ? 10_000 : 100_000;
  const plan = { sessions, runnable: sessions / 10, agent: AGENT };
  const cluster = await startPostgresCluster();
  const dir = await mkdtemp(join(tmpdir(), 'berth-status-reads-'));
  try {
    const url = await cluster.createDatabase('berth_status_reads');
    const postgres = await openPostgresStore({ url, leaseMs: 10_000, retry: loadConfig({}) });
    await prepare(postgres);
    await seedSessions(url, { ...plan, busy: 100, workerIds: [WORKER], now: postgres.clock.now() });
    const sqlitePath = join(dir, 'store.db');
    const sqlite = openSqliteStore({ path: sqlitePath, leaseMs: 10_000, retry: loadConfig({}) });
    await prepare(sqlite);
    seedSqliteSessions(sqlitePath, { ...plan, now: Date.now() });
    return {
      sessions,
      postgres: await measure(postgres),
      sqlite: await measure(sqlite),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
    await cluster.remove();
  }
}

async function prepare(store: Store): Promise<void> {
  await createBenchAgent(store, AGENT);
  const now = store.clock.now();
  await store.registerWorker({
    id: WORKER,
    host: 'bench',
    pid: 1,
    slots: 100,
    heartbeatAt: now,
    startedAt: now,
  });
}

async function measure(store: Store) {
  const app = await buildApp({
    config: loadConfig({}),
    store,
    clock: store.clock,
    log: pino({ level: 'silent' }),
  });
  const { token } = await issueToken(store, null, 'bench', store.clock.now());
  const get = async (url: string) => {
    const res = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
    if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body}`);
    return res.json();
  };
  const status = await get('/v1/status');
  const firstPage = await get('/v1/sessions');
  const result = {
    counted: {
      sessions: status.counts.sessions,
      queueDepth: status.queueDepth,
      page: firstPage.sessions.length,
    },
    statusMs: await timeEach(ROUNDS, () => get('/v1/status')),
    firstPageMs: await timeEach(ROUNDS, () => get('/v1/sessions')),
    baseline: {
      everySessionViewMs: await timeEach(BASELINE_ROUNDS, () => store.listSessionViews(store.clock.now())),
    },
  };
  await app.close();
  await store.close();
  return result;
}
