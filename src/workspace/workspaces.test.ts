/** Sealing a turn's layer on real overlayfs: only through the overlay on the slot. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { test } from 'node:test';
import { FileBlobStore } from '../blobs/index.js';
import { withoutIndex } from './archive-index.js';
import { applyLayerArchive, packLayer } from './layer-archive.js';
import type { PlanStep } from './promotion.js';
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

test('a copy behind a rewind writes only the files that differ, read through indices; unindexed objects are materialised whole', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-workspaces-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const blobs = new FileBlobStore(join(dataDir, 'blobs'));
  const uid = process.getuid?.() ?? 0;
  /** A layer writing `files` and deleting `deleted`, stored under `key` (packed as before indices when `indexed` is false). */
  const layer = async (
    key: string,
    version: number,
    files: Record<string, string>,
    deleted: string[],
    indexed: boolean,
  ) => {
    const upper = await mkdtemp(join(dataDir, 'upper-'));
    const steps: PlanStep[] = deleted.map((path) => ({ op: 'delete', path }));
    for (const [path, content] of Object.entries(files)) {
      if (path.includes('/')) {
        await mkdir(join(upper, 'd'), { recursive: true });
        steps.push({ op: 'mkdir', path: 'd', mode: 0o755, uid, gid: uid });
      }
      await writeFile(join(upper, path), content);
      steps.push({ op: 'move', from: path, path });
    }
    const packed = await buffer(packLayer({ version: 1, steps }, upper));
    const body = indexed ? packed : withoutIndex(packed);
    await blobs.put(key, [body], { maxBytes: 1 << 30 });
    return { version, kind: 'layer' as const, key, size: body.length, turnId: `t${version}` };
  };
  for (const indexed of [true, false]) {
    const v1 = await layer(
      `layers/${indexed}-1`,
      1,
      { 'a.txt': 'one', 'b.txt': 'bee', 'keep.txt': 'kept', 'd/c.txt': 'sea' },
      [],
      indexed,
    );
    const v2 = await layer(`layers/${indexed}-2`, 2, { 'a.txt': 'two', 'e.txt': 'new' }, ['b.txt'], indexed);
    const workspaces = new Workspaces(join(dataDir, `w-${indexed}`), uid, blobs);
    await workspaces.ensureCurrent({ sessionId: 's1', version: 2, entries: [v1, v2] });
    const tree = workspaces.committedPath('s1');
    const untouched = await stat(join(tree, 'keep.txt'));
    // Version 3 promoted onto the copy, then a crash before its stamp moved on: the stamp is behind its tree.
    const v3 = await layer(`layers/${indexed}-3`, 3, { 'd/c.txt': 'sea3', 'f.txt': 'eff' }, [], indexed);
    await applyLayerArchive((await blobs.get(v3.key)).body, tree);
    const rewind = { ...v1, version: 4, kind: 'snapshot' as const, turnId: null, rewoundTo: 1 };
    const chain = { sessionId: 's1', version: 4, entries: [rewind], history: [v1, v2, v3, rewind] };
    const ensured = await workspaces.ensureCurrent(chain);
    assert.deepEqual(
      [ensured.how, ensured.bytes],
      indexed ? ['changed', 'one'.length + 'bee'.length + 'sea'.length] : ['materialised', v1.size],
      `indexed: ${indexed}`,
    );
    assert.deepEqual((await readdir(tree)).sort(), ['a.txt', 'b.txt', 'd', 'keep.txt']);
    assert.equal(await readFile(join(tree, 'a.txt'), 'utf8'), 'one');
    assert.equal(await readFile(join(tree, 'b.txt'), 'utf8'), 'bee');
    assert.equal(
      await readFile(join(tree, 'd/c.txt'), 'utf8'),
      'sea',
      "what version 3 wrote is version 1's again",
    );
    if (indexed)
      assert.equal(
        (await stat(join(tree, 'keep.txt'))).ino,
        untouched.ino,
        'an unchanged file is not rewritten',
      );
    assert.equal((await workspaces.ensureCurrent(chain)).how, 'current');
  }
});
