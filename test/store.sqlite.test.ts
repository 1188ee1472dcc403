import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { agentSpecSchema } from '../src/core/index.js';
import { openSqliteStore } from '../src/store/index.js';
import { LEASE_MS, RETRY, runStoreConformance } from './store/conformance.js';

runStoreConformance('sqlite', async () =>
  openSqliteStore({ path: ':memory:', leaseMs: LEASE_MS, retry: RETRY }),
);

test('sqlite: two processes share one file (WAL, busy timeout) and see each other', async () => {
  const path = join(await mkdtemp(join(tmpdir(), 'berth-store-')), 'berth.db');
  const store = openSqliteStore({ path, leaseMs: LEASE_MS, retry: RETRY });
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), Date.now());
  const child = fork(new URL('./helpers/enqueue-child.js', import.meta.url), [path, '200']);
  const writes: Promise<unknown>[] = [];
  for (let i = 0; i < 200; i++)
    writes.push(store.enqueueMessage({ sessionId: 'parent', agent: 'sh', text: `p${i}`, now: Date.now() }));
  await Promise.all(writes);
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 0);
  assert.equal((await store.listMessages('child', 0, 500)).length, 200);
  assert.equal((await store.listMessages('parent', 0, 500)).length, 200);
  await store.close();
});
