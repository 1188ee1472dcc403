/**
 * A live sandbox's files as the worker serves them (real files in a temp dir standing in for
 * the slot): a streamed round trip, the directory operations, symlinks that lead outside,
 * and the quota, each refusal leaving nothing behind.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { type TestContext, test } from 'node:test';
import { isBerthError } from '../core/index.js';
import { treeDiskBytes } from '../workspace/index.js';
import { SandboxFiles } from './sandbox-files.js';

const MiB = 2 ** 20;

async function setUp(t: TestContext, limitBytes = 64 * MiB) {
  const base = await mkdtemp(join(tmpdir(), 'berth-files-'));
  t.after(() => rm(base, { recursive: true, force: true }));
  const root = join(base, 'workspace');
  const outside = join(base, 'outside');
  await mkdir(root);
  await mkdir(outside);
  await writeFile(join(outside, 'secret'), 'outside\n');
  const files = new SandboxFiles({
    sessionId: 's1',
    root: async () => root,
    uid: 1000,
    limitBytes,
    usedBytes: () => treeDiskBytes(root),
  });
  return { root, outside, files };
}

const bytesOf = async (body: Readable) => {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};
const refused = (code: string) => (err: unknown) => isBerthError(err) && err.code === code;

test('a 1 MiB file streams in and out unchanged, owned by the sandbox user, with no temp file left', async (t) => {
  const { root, files } = await setUp(t);
  const data = randomBytes(MiB);
  const written = await files.write(
    '/workspace/dir/a.bin',
    Readable.from([data.subarray(0, 1000), data.subarray(1000)]),
    true,
  );
  assert.deepEqual([written.name, written.type, written.size], ['a.bin', 'file', MiB]);
  const read = await files.read('dir/a.bin');
  assert.equal(read.size, MiB);
  assert.ok((await bytesOf(read.body)).equals(data));
  for (const path of ['dir', 'dir/a.bin']) assert.equal((await lstat(join(root, path))).uid, 1000, path);
  assert.deepEqual(await readdir(join(root, 'dir')), ['a.bin']);
  await files.write('dir/a.bin', Readable.from([Buffer.from('short')]), false);
  assert.equal(await readFile(join(root, 'dir/a.bin'), 'utf8'), 'short', 'replaced');
  await assert.rejects(
    files.write('nodir/b', Readable.from([Buffer.from('x')]), false),
    refused('FILE_NOT_FOUND'),
  );
  await assert.rejects(
    files.write('dir', Readable.from([Buffer.from('x')]), false),
    refused('FILE_CONFLICT'),
  );
});

test('list, stat, mkdir, rename and remove work on the workspace and answer codes', async (t) => {
  const { root, files } = await setUp(t);
  await files.mkdir('a/b', true);
  await files.mkdir('a/b', true);
  await assert.rejects(files.mkdir('a/b', false), refused('FILE_CONFLICT'));
  await files.mkdir('a/c', false);
  await writeFile(join(root, 'a/b/f.txt'), 'hello');
  await symlink('b/f.txt', join(root, 'a/link'));
  const listed = await files.list('a');
  assert.deepEqual(
    listed.entries.map((e) => [e.name, e.type]),
    [
      ['b', 'dir'],
      ['c', 'dir'],
      ['link', 'symlink'],
    ],
  );
  assert.equal(listed.omitted, 0);
  const st = await files.stat('/workspace/a/b/f.txt');
  assert.deepEqual([st.name, st.type, st.size, st.mode], ['f.txt', 'file', 5, 0o644]);
  assert.equal((await files.stat('')).type, 'dir');
  assert.equal(
    (await bytesOf((await files.read('a/link')).body)).toString(),
    'hello',
    'a link inside is followed',
  );
  await files.rename('a/b/f.txt', 'a/c/g.txt');
  assert.equal(await readFile(join(root, 'a/c/g.txt'), 'utf8'), 'hello');
  await assert.rejects(files.stat('a/b/f.txt'), refused('FILE_NOT_FOUND'));
  await assert.rejects(files.rename('a', 'a/b/inside'), refused('FILE_CONFLICT'));
  await assert.rejects(files.remove('a', false), refused('FILE_CONFLICT'));
  await files.remove('a/link', false);
  await files.remove('a', true);
  assert.deepEqual(await readdir(root), []);
  await assert.rejects(files.remove('', true), refused('FILE_CONFLICT'));
  await writeFile(join(root, 'fine'), '');
  await writeFile(Buffer.concat([Buffer.from(`${root}/`), Buffer.from([0x61, 0xff])]), '');
  const odd = await files.list('');
  assert.deepEqual(
    [odd.entries.map((e) => e.name), odd.omitted],
    [['fine'], 1],
    'the name that is not UTF-8',
  );
});

test('a symlink leading outside the workspace lets no read, write, listing or removal through', async (t) => {
  const { root, outside, files } = await setUp(t);
  await symlink(outside, join(root, 'out'));
  await symlink(join(outside, 'secret'), join(root, 'secret'));
  await symlink('/etc', join(root, 'etc'));
  const escapes = [
    () => files.read('secret'),
    () => files.read('out/secret'),
    () => files.read('etc/passwd'),
    () => files.write('out/planted', Readable.from([Buffer.from('x')]), false),
    () => files.write('out/new/planted', Readable.from([Buffer.from('x')]), true),
    () => files.list('out'),
    () => files.stat('out/secret'),
    () => files.mkdir('out/d', true),
    () => files.rename('out/secret', 'stolen'),
    () => files.remove('out/secret', false),
  ];
  for (const [i, attempt] of escapes.entries())
    await assert.rejects(attempt(), refused('PATH_OUTSIDE_WORKSPACE'), `attempt ${i}`);
  await files.remove('out', true);
  assert.deepEqual((await readdir(outside)).sort(), ['secret'], 'nothing made, moved or removed outside');
  assert.deepEqual((await readdir(root)).sort(), ['etc', 'secret']);
});

test('a write that would pass the quota is refused, leaving nothing and the old file intact', async (t) => {
  const { root, files } = await setUp(t, MiB);
  await files.write('keep.txt', Readable.from([Buffer.from('old')]), false);
  const big = Readable.from([randomBytes(MiB / 2), randomBytes(MiB / 2), randomBytes(MiB / 2)]);
  await assert.rejects(files.write('keep.txt', big, false), refused('WORKSPACE_QUOTA_EXCEEDED'));
  await assert.rejects(
    files.write('new.bin', Readable.from([randomBytes(2 * MiB)]), false),
    refused('WORKSPACE_QUOTA_EXCEEDED'),
  );
  assert.deepEqual(await readdir(root), ['keep.txt']);
  assert.equal(await readFile(join(root, 'keep.txt'), 'utf8'), 'old');
  await files.write('fits.bin', Readable.from([randomBytes(MiB / 2)]), false);
});
