/** Layer archives on real files: a tree round-trips, a layer applies deletions and moves, a bad archive is refused whole. */
import assert from 'node:assert/strict';
import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { isBerthError } from '../core/index.js';
import { applyLayerArchive, packLayer, packTree } from './layer-archive.js';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function scratch(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'berth-layer-archive-'));
  dirs.push(d);
  return d;
}

/** path → what it is (content, link target, or dir) and its mode, for comparing two trees. */
async function describe(root: string, rel = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(join(root, rel))).sort()) {
    const path = rel ? `${rel}/${name}` : name;
    const st = await lstat(join(root, path));
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isSymbolicLink()) out[path] = `link -> ${await readlink(join(root, path))}`;
    else if (st.isDirectory()) {
      out[path] = `dir ${mode}`;
      Object.assign(out, await describe(root, path));
    } else out[path] = `file ${mode} ${st.size} ${(await readFile(join(root, path))).toString('base64')}`;
  }
  return out;
}

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}

test('a tree packed and applied onto an empty dir is the same tree, twice over', async () => {
  const source = await scratch();
  await mkdir(join(source, 'src/deep/er'), { recursive: true });
  await writeFile(join(source, 'README'), 'hello\n');
  await writeFile(join(source, 'src/empty'), '');
  await writeFile(join(source, 'src/deep/er/big.bin'), Buffer.alloc(3 * 2 ** 20, 7));
  await writeFile(join(source, 'src/deep/er/huge.bin'), randomBytes(5 * 2 ** 20));
  await mkdir(join(source, 'many'));
  for (let i = 0; i < 40; i++) await writeFile(join(source, `many/${i}`), randomBytes(i * 1000));
  await writeFile(join(source, 'src/run.sh'), '#!/bin/sh\n', { mode: 0o755 });
  await writeFile(join(source, 'name with\nnewline'), 'odd');
  await symlink('src/run.sh', join(source, 'link'));
  const archive = await collect(packTree(source));
  const target = join(await scratch(), 'materialised');
  assert.equal(await applyLayerArchive([archive], target), 51);
  assert.deepEqual(await describe(target), await describe(source));
  await applyLayerArchive([archive], target);
  assert.deepEqual(await describe(target), await describe(source), 'applying again changes nothing');
});

test('a layer deletes what its plan deletes and moves in what its upper dir holds', async () => {
  const committed = await scratch();
  await mkdir(join(committed, 'gone/inner'), { recursive: true });
  await writeFile(join(committed, 'gone/inner/x'), 'x');
  await writeFile(join(committed, 'kept'), 'old');
  await writeFile(join(committed, 'was-a-file'), 'f');
  const upper = await scratch();
  await writeFile(join(upper, 'kept'), 'new');
  await mkdir(join(upper, 'was-a-file'));
  await writeFile(join(upper, 'was-a-file/now-inside'), 'in');
  const plan = {
    version: 1 as const,
    steps: [
      { op: 'delete' as const, path: 'gone' },
      { op: 'move' as const, from: 'kept', path: 'kept' },
      { op: 'mkdir' as const, path: 'was-a-file', mode: 0o750, uid: 0, gid: 0 },
      { op: 'move' as const, from: 'was-a-file/now-inside', path: 'was-a-file/now-inside' },
    ],
  };
  await applyLayerArchive(packLayer(plan, upper), committed);
  assert.deepEqual(await describe(committed), {
    kept: `file 644 3 ${Buffer.from('new').toString('base64')}`,
    'was-a-file': 'dir 750',
    'was-a-file/now-inside': `file 644 2 ${Buffer.from('in').toString('base64')}`,
  });
});

test('entries apply as if one by one while files are written side by side', async () => {
  const entry = (e: object, content = '') => `${JSON.stringify(e)}\n${content}`;
  const file = (p: string, content: string) =>
    entry({ t: 'file', p, m: 0o644, u: 0, g: 0, s: content.length, mt: 0 }, content);
  const lines = [
    'berth-layer 1\n',
    entry({ t: 'dir', p: 'a', m: 0o755, u: 0, g: 0 }),
    ...Array.from({ length: 30 }, (_, i) => file(`a/${i}`, `first ${i}`)),
    file('a/0', 'second'),
    entry({ t: 'delete', p: 'a/1' }),
    file('b', 'a file'),
    entry({ t: 'dir', p: 'b', m: 0o700, u: 0, g: 0 }),
    file('b/in', 'inside'),
    entry({ t: 'delete', p: 'a' }),
    file('a', 'last'),
  ];
  const archive = gzipSync(
    Buffer.from(`${lines.join('')}${JSON.stringify({ t: 'end', n: lines.length - 1 })}\n`),
  );
  const target = await scratch();
  await applyLayerArchive([archive], target);
  assert.deepEqual(await describe(target), {
    a: `file 644 4 ${Buffer.from('last').toString('base64')}`,
    b: 'dir 700',
    'b/in': `file 644 6 ${Buffer.from('inside').toString('base64')}`,
  });
});

test('an archive cut off inside a large file leaves no file half written', async () => {
  const source = await scratch();
  await writeFile(join(source, 'small'), 'whole');
  await writeFile(join(source, 'large'), randomBytes(6 * 2 ** 20));
  const archive = await collect(packTree(source));
  const target = await scratch();
  await assert.rejects(
    applyLayerArchive([archive.subarray(0, archive.length / 2)], target),
    /truncated|unexpected end/,
  );
  assert.deepEqual(await readdir(target), [], 'the large file never appears, nor its temp');
});

test('a truncated, forged or escaping archive is refused with WORKSPACE_FAILED', async () => {
  const source = await scratch();
  await writeFile(join(source, 'a'), 'content');
  const good = await collect(packTree(source));
  const forged = (lines: string[]) => gzipSync(Buffer.from(`${lines.join('\n')}\n`));
  const cases: { name: string; archive: Buffer; why: RegExp }[] = [
    { name: 'truncated', archive: good.subarray(0, good.length - 8), why: /truncated|unexpected end/ },
    { name: 'not ours', archive: forged(['tar 1']), why: /magic/ },
    {
      name: 'escaping path',
      archive: forged([
        'berth-layer 1',
        JSON.stringify({ t: 'delete', p: '../../etc' }),
        '{"t":"end","n":1}',
      ]),
      why: /not a relative path/,
    },
    {
      name: 'through a symlink',
      archive: forged([
        'berth-layer 1',
        JSON.stringify({ t: 'link', p: 'out', to: '/tmp', u: 0, g: 0 }),
        JSON.stringify({ t: 'dir', p: 'out/evil', m: 0o755, u: 0, g: 0 }),
        '{"t":"end","n":2}',
      ]),
      why: /under out, which is not a directory/,
    },
    {
      name: 'wrong entry count',
      archive: forged(['berth-layer 1', JSON.stringify({ t: 'delete', p: 'x' }), '{"t":"end","n":5}']),
      why: /ends after 1 entries/,
    },
  ];
  for (const c of cases) {
    const target = await scratch();
    await assert.rejects(
      applyLayerArchive([c.archive], target),
      (err: unknown) =>
        (isBerthError(err, 'WORKSPACE_FAILED') && c.why.test((err as Error).message)) ||
        c.why.test(String((err as Error).message)),
      c.name,
    );
  }
  await assert.rejects(lstat('/tmp/evil'), /ENOENT/, 'nothing written through the link');
});
