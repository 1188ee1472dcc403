/**
 * berth's real API on an in-memory SQLite store, listening on a free loopback port, closed
 * with the test: for unit tests of clients of the API (the CLI's commands, `berth mcp`).
 */
import type { TestContext } from 'node:test';
import { pino } from 'pino';
import { buildApp } from '../../src/api/index.js';
import { loadConfig, systemClock } from '../../src/core/index.js';
import { openSqliteStore, type Store } from '../../src/store/index.js';

/** `close` stops the API early (to see a client meet a berth that does not answer). */
export async function listenMemoryApi(
  t: Pick<TestContext, 'after'>,
): Promise<{ url: string; store: Store; close: () => Promise<void> }> {
  const config = loadConfig({});
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const app = await buildApp({ config, store, clock: systemClock, log: pino({ level: 'silent' }) });
  t.after(async () => {
    await app.close();
    await store.close();
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { url, store, close: () => app.close() };
}
