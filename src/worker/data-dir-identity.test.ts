import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { dataDirIdentity } from './data-dir-identity.js';

test('a data dir keeps its identity across reads, workers starting together agree, a wiped one gets a new one', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-dd-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const together = await Promise.all([1, 2, 3, 4].map(() => dataDirIdentity(dir)));
  assert.equal(new Set(together.map((d) => d.id)).size, 1, 'one id for every worker');
  assert.match(together[0]!.id, /^dd_[0-9a-f]{24}$/);
  assert.ok(together[0]!.name.endsWith(`:${dir}`));
  assert.equal((await dataDirIdentity(dir)).id, together[0]!.id, 'a restart reads the same id');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir);
  assert.notEqual((await dataDirIdentity(dir)).id, together[0]!.id, 'a wiped disk is another data dir');
});
