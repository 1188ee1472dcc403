import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { moveIntoPlace, stagingPath, writeFileAtomic } from './durable-files.js';

async function scratch(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'berth-durable-'));
}

test('writeFileAtomic replaces the file whole, with the mode asked for, and leaves no staging file', async () => {
  const dir = await scratch();
  try {
    const file = join(dir, 'secrets.json');
    await writeFileAtomic(file, 'old');
    await writeFileAtomic(file, 'new', { mode: 0o600 });
    assert.equal(await readFile(file, 'utf8'), 'new');
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.deepEqual(await readdir(dir), ['secrets.json']);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a failed write leaves the old content and no staging file', async () => {
  const dir = await scratch();
  try {
    const file = join(dir, 'plan.json');
    await writeFileAtomic(file, 'old');
    await mkdir(join(dir, 'gone'));
    await assert.rejects(writeFileAtomic(join(dir, 'gone', 'missing', 'x'), 'new'));
    assert.equal(await readFile(file, 'utf8'), 'old');
    assert.deepEqual((await readdir(dir)).sort(), ['gone', 'plan.json']);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('moveIntoPlace: the first staged directory wins, a later one is deleted and reports false', async () => {
  const dir = await scratch();
  try {
    const target = join(dir, 'bundle');
    const cases = [
      { name: 'first writer', content: 'a', moved: true },
      { name: 'second writer', content: 'b', moved: false },
    ];
    for (const c of cases) {
      const staged = stagingPath(target);
      await mkdir(staged);
      await writeFile(join(staged, 'file'), c.content);
      assert.equal(await moveIntoPlace(staged, target), c.moved, c.name);
    }
    assert.equal(await readFile(join(target, 'file'), 'utf8'), 'a');
    assert.deepEqual(await readdir(dir), ['bundle']);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('staging names differ between writers and end as asked', () => {
  const a = stagingPath('/x/y');
  assert.notEqual(a, stagingPath('/x/y'));
  assert.match(stagingPath('/x/rootfs.tar', 'partial'), /^\/x\/rootfs\.tar\.\d+-[0-9a-f]{8}\.partial$/);
});
