/** Sealing a turn's layer on real overlayfs: only through the overlay on the slot. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileBlobStore } from '../blobs/index.js';
import { Workspaces } from './workspaces.js';

test('seal refuses a slot whose overlay was taken off (it would plan to delete every committed file)', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-workspaces-'));
  const workspaces = new Workspaces(dataDir, 1000, new FileBlobStore(join(dataDir, 'blobs')));
  await workspaces.prepare();
  t.after(async () => {
    await workspaces.closeSlot('sbx');
    await workspaces.release();
    await rm(dataDir, { recursive: true, force: true });
  });
  await workspaces.mountAttempt('s1', 't1', 'sbx');
  await writeFile(join(workspaces.slotPath('sbx'), 'kept.txt'), 'one');
  await workspaces.seal('s1', 't1', 'sbx');
  await workspaces.unmountSlot('sbx');
  await workspaces.promote('s1', 't1', null);
  await stat(join(workspaces.committedPath('s1'), 'kept.txt'));

  // A clean-up that took this worker for dead unmounted the slot while the turn was committing.
  await workspaces.mountAttempt('s1', 't2', 'sbx');
  await workspaces.unmountSlot('sbx');
  await assert.rejects(workspaces.seal('s1', 't2', 'sbx'), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'WORKSPACE_FAILED');
    assert.match(err.message, /no longer mounted/);
    return true;
  });
  await workspaces.promote('s1', 't2', null); // no plan was written: nothing is applied
  await stat(join(workspaces.committedPath('s1'), 'kept.txt'));
});

test('a stamp a crash left empty reads as absent: the tree is fetched afresh from the chain (a snapshot too large to pack in memory)', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-workspaces-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const workspaces = new Workspaces(dataDir, 1000, new FileBlobStore(join(dataDir, 'blobs')));
  const tree = workspaces.committedPath('s1');
  await mkdir(tree, { recursive: true });
  await writeFile(join(tree, 'kept.txt'), 'one');
  const big = randomBytes(9 * 2 ** 20);
  await writeFile(join(tree, 'big.bin'), big);
  assert.equal((await workspaces.ensureCurrent({ sessionId: 's1', version: 1, entries: [] })).how, 'adopted');
  const snapshot = await workspaces.uploadSnapshot('s1');
  assert.ok(snapshot);
  const chain = {
    sessionId: 's1',
    version: 1,
    entries: [{ ...snapshot, kind: 'snapshot' as const, turnId: null }],
  };
  assert.equal((await workspaces.ensureCurrent(chain)).how, 'current');

  await writeFile(`${tree}.stamp`, ''); // a rename that reached the disk before its data
  assert.equal((await workspaces.ensureCurrent(chain)).how, 'materialised');
  assert.equal(await readFile(join(tree, 'kept.txt'), 'utf8'), 'one');
  assert.ok(big.equals(await readFile(join(tree, 'big.bin'))));
  assert.equal((await workspaces.ensureCurrent(chain)).how, 'current');
});
