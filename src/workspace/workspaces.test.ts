/**
 * A data dir's workspaces for real: sealing a turn's layer on overlayfs (only through the
 * overlay on the slot), stamps, and evicting a session's copy (pins from live processes,
 * resident copies, a SIGKILL mid-eviction).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { type TestContext, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FileBlobStore } from '../blobs/index.js';
import type { WorkspaceChain } from '../core/index.js';
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
  const chain = await adoptedChain(workspaces);
  assert.equal((await workspaces.ensureCurrent(chain)).how, 'current');

  await writeFile(`${tree}.stamp`, ''); // a rename that reached the disk before its data
  assert.equal((await workspaces.ensureCurrent(chain)).how, 'materialised');
  assert.equal(await readFile(join(tree, 'kept.txt'), 'utf8'), 'one');
  assert.ok(big.equals(await readFile(join(tree, 'big.bin'))));
  assert.equal((await workspaces.ensureCurrent(chain)).how, 'current');
});

/** Session s1's copy (as found on a data dir from before chains) snapshotted: a chain of one snapshot. */
async function adoptedChain(workspaces: Workspaces): Promise<WorkspaceChain> {
  assert.equal((await workspaces.ensureCurrent({ sessionId: 's1', version: 1, entries: [] })).how, 'adopted');
  const snapshot = await workspaces.uploadSnapshot('s1');
  assert.ok(snapshot);
  return { sessionId: 's1', version: 1, entries: [{ ...snapshot, kind: 'snapshot', turnId: null }] };
}

const FILES = 400;

/** A data dir holding session s1's copy of a one-snapshot chain: FILES files, each naming itself. */
async function copyWithChain(
  t: TestContext,
): Promise<{ dataDir: string; workspaces: Workspaces; chain: WorkspaceChain }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-eviction-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const workspaces = new Workspaces(dataDir, 1000, new FileBlobStore(join(dataDir, 'blobs')));
  const tree = workspaces.committedPath('s1');
  await mkdir(join(tree, 'd'), { recursive: true });
  for (let i = 0; i < FILES; i++) await writeFile(join(tree, 'd', `f${i}`), `file ${i}\n`);
  return { dataDir, workspaces, chain: await adoptedChain(workspaces) };
}

async function assertIntact(workspaces: Workspaces): Promise<void> {
  const tree = workspaces.committedPath('s1');
  for (let i = 0; i < FILES; i++)
    assert.equal(await readFile(join(tree, 'd', `f${i}`), 'utf8'), `file ${i}\n`);
}

test('a copy in use by a live process is never evicted; once released it is, and comes back whole from the chain', async (t) => {
  const { dataDir, workspaces, chain } = await copyWithChain(t);
  await workspaces.pinCopy('s1');
  assert.equal(await workspaces.evictCopy('s1'), 'pinned');
  await workspaces.unpinCopy('s1');
  // Another process on the data dir (alive) pins it too.
  const other = spawn('sleep', ['30']);
  t.after(() => other.kill('SIGKILL'));
  await writeFile(join(dataDir, 'workspaces', 's1', 'pins', String(other.pid)), '');
  assert.equal(await workspaces.evictCopy('s1'), 'pinned');
  await assertIntact(workspaces);
  other.kill('SIGKILL');
  await once(other, 'exit');
  // Its pin is stale now: a dead process uses nothing.
  assert.equal(await workspaces.evictCopy('s1'), 'evicted');
  await assert.rejects(stat(workspaces.committedPath('s1')), /ENOENT/);
  assert.deepEqual(await workspaces.listCopies(), [], 'no dir left of the evicted session');
  assert.equal((await workspaces.ensureCurrent(chain)).how, 'materialised');
  await assertIntact(workspaces);
});

test("a resident agent's workspace is never evicted: it is the only copy", async (t) => {
  const { workspaces } = await copyWithChain(t);
  await workspaces.writeResidentMarker({ sessionId: 's1', holder: 'dd_1', epoch: 1 });
  assert.equal(await workspaces.evictCopy('s1'), 'resident');
  await assertIntact(workspaces);
});

test('an eviction SIGKILLed midway: the half-deleted copy is never used as whole, the next turn materialises it', async (t) => {
  const { dataDir, workspaces, chain } = await copyWithChain(t);
  const module = fileURLToPath(new URL('./copy-eviction.js', import.meta.url));
  const layoutModule = fileURLToPath(new URL('./layout.js', import.meta.url));
  const child = spawn(process.execPath, [
    '--input-type=module',
    '-e',
    `const { evictCopy } = await import(${JSON.stringify(module)});
     const { workspaceLayout } = await import(${JSON.stringify(layoutModule)});
     await evictCopy(workspaceLayout(${JSON.stringify(dataDir)}), 's1', Date.now);
     process.stdout.write('done');`,
  ]);
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  // Killed as soon as the stamp or the tree is gone: the copy is then half deleted, or wholly.
  const gone = (path: string) =>
    stat(path).then(
      () => false,
      () => true,
    );
  const tree = workspaces.committedPath('s1');
  while (child.exitCode === null && !(await gone(`${tree}.stamp`)) && !(await gone(tree)))
    await new Promise((r) => setTimeout(r, 1));
  child.kill('SIGKILL');
  await once(child, 'exit').catch(() => undefined);
  t.diagnostic(
    `eviction ${out === 'done' ? 'finished' : 'killed'}; ${(await workspaces.listCopies())[0]?.bytes} bytes left`,
  );
  // A pin waits out no dead process's marker; the copy is brought level with the chain.
  await workspaces.pinCopy('s1');
  const ensured = await workspaces.ensureCurrent(chain);
  assert.ok(ensured.how === 'current' || ensured.how === 'materialised', ensured.how);
  await assertIntact(workspaces);
  await workspaces.unpinCopy('s1');
});

test('a pin an eviction removed with the session dir is written again once the eviction ended', async (t) => {
  const { dataDir, workspaces } = await copyWithChain(t);
  const session = join(dataDir, 'workspaces', 's1');
  const evictor = spawn('sleep', ['30']);
  t.after(() => evictor.kill('SIGKILL'));
  await writeFile(join(session, 'evicting'), JSON.stringify({ pid: evictor.pid, at: Date.now() }));
  const pinning = workspaces.pinCopy('s1');
  const pin = join(session, 'pins', String(process.pid));
  while (
    !(await stat(pin).then(
      () => true,
      () => false,
    ))
  )
    await new Promise((r) => setTimeout(r, 5));
  // The eviction read the pins before this one was written: it removes them, then its marker.
  await rm(join(session, 'pins'), { recursive: true });
  await rm(join(session, 'evicting'));
  await pinning;
  await stat(pin);
  assert.equal(await workspaces.evictCopy('s1'), 'pinned');
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
