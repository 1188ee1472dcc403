/** The snapshot of a run's sessions reads a session the run never created as empty, not as an error. */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readStoreSnapshot } from './snapshot.js';

test('a session the run never created (interrupted while starting) reads as empty', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-snapshot-test-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const [snapshot] = await readStoreSnapshot(dir, ['chaos-never-1'], 10_000, '');
  assert.deepEqual(snapshot, {
    id: 'chaos-never-1',
    view: null,
    messages: [],
    turns: [],
    state: {},
    events: [],
    chain: { sessionId: 'chaos-never-1', version: 0, entries: [] },
  });
});
