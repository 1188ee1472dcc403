/** /v1/chaos/reports: the saved `berth chaos` reports, newest first, cut for the dashboard; admin only. */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { hostPaths, loadConfig, systemClock } from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';

test('chaos reports are listed newest first with their faults and timing', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-chaos-reports-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const config = loadConfig({ BERTH_DATA: dataDir });
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const app = await buildApp({ config, store, clock: systemClock, log: pino({ level: 'silent' }) });
  const admin = (await issueToken(store, null, 'admin', Date.now())).token;
  const tenant = (await issueToken(store, 'acme', '', Date.now())).token;
  const get = (token: string) =>
    app.inject({ method: 'GET', url: '/v1/chaos/reports', headers: { authorization: `Bearer ${token}` } });
  assert.deepEqual((await get(admin)).json().reports, [], 'no directory yet: none');

  const dir = hostPaths(dataDir).chaosReportsDir;
  await mkdir(dir);
  for (const [file, startedAt] of [
    ['2026-01-01T00-00-00-000Z.json', 1],
    ['2026-01-02T00-00-00-000Z.json', 2],
  ] as const) {
    const faultLog = [{ kind: 'sandbox-kill', at: startedAt + 10, container: 'c', session: 's' }];
    await writeFile(
      join(dir, file),
      JSON.stringify({ startedAt, wallMs: 100, passed: true, faultLog, timing: {}, requests: {} }),
    );
  }
  const { reports } = (await get(admin)).json();
  assert.deepEqual(
    reports.map((r: { startedAt: number }) => r.startedAt),
    [2, 1],
  );
  assert.deepEqual(reports[0].faults, [{ kind: 'sandbox-kill', at: 12 }]);
  assert.equal((await get(tenant)).statusCode, 403);
  await store.close();
});
