import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { agentSpecSchema } from '../src/core/index.js';
import { openSqliteStore } from '../src/store/index.js';
import { LEASE_MS, RETRY } from './store/conformance.js';

test('sqlite: two processes share one file (WAL, busy timeout), see each other, and hear of each other’s writes', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-store-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'berth.db');
  const store = openSqliteStore({ path, leaseMs: LEASE_MS, retry: RETRY });
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), Date.now());
  const heardFromChild: string[] = [];
  store.onChange((c) => {
    if ((c.type === 'enqueued' || c.type === 'events') && c.sessionId === 'child')
      heardFromChild.push(c.type);
  });
  await new Promise((r) => setTimeout(r, 50)); // our relay port is recorded
  const child = fork(new URL('./helpers/enqueue-child.js', import.meta.url), [path, '200']);
  const writes: Promise<unknown>[] = [];
  for (let i = 0; i < 200; i++)
    writes.push(store.enqueueMessage({ sessionId: 'parent', agent: 'sh', text: `p${i}`, now: Date.now() }));
  await Promise.all(writes);
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 0);
  assert.equal((await store.listMessages('child', 0, 500)).length, 200);
  assert.equal((await store.listMessages('parent', 0, 500)).length, 200);
  assert.ok(heardFromChild.includes('enqueued'), 'the other process’s enqueues reached this one');
  assert.ok(heardFromChild.includes('events'));
  await store.close();
});
