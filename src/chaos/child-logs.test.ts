import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { readChildLogs } from './child-logs.js';

test('readChildLogs: the logs of started processes; a never-started one has none; a started one whose log is gone fails, naming it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-child-logs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'api.log'), 'api lines\n');
  const api = { name: 'api', logFile: join(dir, 'api.log'), starts: 1 };
  const spare = { name: 'worker-2', logFile: join(dir, 'worker-2.log'), starts: 0 };
  assert.deepEqual(await readChildLogs([api, spare]), ['api lines\n']);
  const lost = { name: 'n1-worker', logFile: join(dir, 'n1-worker.log'), starts: 2 };
  await assert.rejects(
    readChildLogs([api, lost]),
    /^Error: the log of n1-worker \(.*n1-worker\.log\), started 2 times, cannot be read: ENOENT/,
  );
});
