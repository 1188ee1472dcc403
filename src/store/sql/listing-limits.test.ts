/**
 * A listing's first page reads its page, not the table: over 1,000 rows (agents, tokens,
 * queued sessions in two tenants), the rows the engine hands the listing's program are at
 * most the page's limit, plus the counts and shares the claim queue's order needs. Real
 * SQLite; the reads are counted between the driver and the program.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentSpecSchema, type PageRequest } from '../../core/index.js';
import { openSqliteStore } from '../sqlite/sqlite-store.js';
import type { Program } from './program.js';
import { type SqlDriver, SqlStore } from './sql-store.js';

const BASE = 1_700_000_000_000;
const ROWS = 1000;
const LIMIT = 100;
const options = { leaseMs: 10_000, retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 3 } };

/** The store over the same database, counting the rows every read statement returns. */
function countingStore(store: SqlStore): { store: SqlStore; rowsRead: () => number } {
  const inner = (store as unknown as { driver: SqlDriver }).driver;
  let rows = 0;
  function* counted<T>(program: Program<T>): Program<T> {
    let step = program.next();
    while (!step.done) {
      const result = yield step.value;
      if (Array.isArray(result)) rows += result.length;
      else if (result !== undefined && typeof result === 'object') rows += 1;
      step = program.next(result);
    }
    return step.value;
  }
  const driver: SqlDriver = {
    kind: inner.kind,
    clock: inner.clock,
    write: (program, durability) => inner.write(program, durability),
    read: (program) => inner.read(() => counted(program())),
    renew: (program, budgetMs) => inner.renew(program, budgetMs),
    listen: () => {},
    close: () => inner.close(),
  };
  return {
    store: new SqlStore(driver, options),
    rowsRead: () => {
      const n = rows;
      rows = 0;
      return n;
    },
  };
}

test('the first page of a 1,000-row listing reads at most its limit of rows', async () => {
  const base = openSqliteStore({ path: ':memory:', ...options });
  const { store, rowsRead } = countingStore(base);
  const page: PageRequest = { limit: LIMIT };
  for (let i = 0; i < ROWS; i++) {
    const tenant = i % 2 ? 'a' : 'b';
    await store.createAgent(agentSpecSchema.parse({ name: `agent-${i}`, provider: 'command' }), BASE, tenant);
    await store.insertApiToken({ id: `tok-${i}`, tenant, hash: `h${i}`, label: '' }, BASE + i);
    await store.enqueueMessage({ sessionId: `s${i}`, agent: `agent-${i}`, text: 'x', now: BASE, tenant });
  }
  rowsRead();
  assert.equal((await store.listAgents(undefined, page)).length, LIMIT);
  assert.equal(rowsRead(), LIMIT, 'agents');
  assert.equal((await store.listApiTokens(page)).length, LIMIT);
  assert.equal(rowsRead(), LIMIT, 'tokens');
  const queue = await store.listQueue(BASE, undefined, page);
  assert.equal(queue.length, LIMIT);
  // The tenants' shares and counts (a row each), and at most a page of each tenant's part.
  assert.ok(rowsRead() <= 2 + 2 + 2 * LIMIT, 'queue');
  assert.equal((await store.listAgents(undefined)).length, ROWS, 'without a page: every row');
  await store.close();
});
