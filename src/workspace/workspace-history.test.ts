/**
 * Workspace history on real archives in a file blob store: a version's tree listed and
 * read, a commit's diff (added, modified, deleted, binary, renamed, mode), the bounds, and
 * versions a snapshot dropped refused.
 */
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { after, test } from 'node:test';
import { FileBlobStore } from '../blobs/index.js';
import { type ChainEntry, isBerthError, type WorkspaceChain } from '../core/index.js';
import { withoutIndex } from './archive-index.js';
import { packLayer, packTree } from './layer-archive.js';
import type { PlanStep } from './promotion.js';
import { DEFAULT_HISTORY_LIMITS, WorkspaceHistory } from './workspace-history.js';

/** One temp dir for the whole file, removed at the end; each scratch dir is made inside it. */
const root = await mkdtemp(join(tmpdir(), 'berth-history-'));
after(() => rm(root, { recursive: true, force: true }));
const scratch = () => mkdtemp(join(root, 'd-'));

const collect = (stream: AsyncIterable<Uint8Array>): Promise<Buffer> => buffer(stream);

const uid = process.getuid?.() ?? 0;

/** A layer of `files` written and `deleted` paths, as sealing would plan it, stored under `key`. */
async function layer(
  blobs: FileBlobStore,
  key: string,
  files: Record<string, string | Buffer>,
  deleted: string[] = [],
  modes: Record<string, number> = {},
  indexed = true,
): Promise<number> {
  const upper = await scratch();
  const steps: PlanStep[] = deleted.map((path) => ({ op: 'delete', path }));
  const made = new Set<string>();
  for (const [path, content] of Object.entries(files)) {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (made.has(dir)) continue;
      made.add(dir);
      await mkdir(join(upper, dir), { recursive: true });
      steps.push({ op: 'mkdir', path: dir, mode: 0o755, uid, gid: uid });
    }
    await writeFile(join(upper, path), content);
    if (modes[path] !== undefined) await chmod(join(upper, path), modes[path]);
    steps.push({ op: 'move', from: path, path });
  }
  const packed = await collect(packLayer({ version: 1, steps }, upper));
  const bytes = indexed ? packed : withoutIndex(packed);
  await blobs.put(key, [bytes], { maxBytes: 1 << 30 });
  return bytes.length;
}

const BINARY = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3, 0xff]);

/** Two commits; `indexed: false` stores their objects as versions before indices packed them. */
async function setup({ indexed = true } = {}) {
  const blobs = new FileBlobStore(await scratch());
  const entries: ChainEntry[] = [];
  const add = async (
    version: number,
    ...args: Parameters<typeof layer> extends [unknown, unknown, ...infer R] ? R : never
  ) => {
    const key = `layers/v${version}`;
    entries.push({
      version,
      kind: 'layer',
      key,
      size: await layer(blobs, key, args[0], args[1], args[2], indexed),
      turnId: `turn_${version}`,
    });
  };
  await add(1, {
    'a.txt': 'one\ntwo\nthree\n',
    'img.bin': BINARY,
    'dir/b.txt': 'bee\n',
    'old-name.txt': 'the same content\n',
    'run.sh': '#!/bin/sh\n',
  });
  await add(
    2,
    {
      'a.txt': 'one\n2\nthree\nfour\n',
      'img.bin': Buffer.concat([BINARY, BINARY]),
      'new-name.txt': 'the same content\n',
      'c/new.txt': 'fresh\n',
      'run.sh': '#!/bin/sh\n',
    },
    ['dir', 'old-name.txt'],
    { 'run.sh': 0o755 },
  );
  const chain: WorkspaceChain = { sessionId: 's1', version: 3, entries };
  return { blobs, chain, history: new WorkspaceHistory(blobs) };
}

test('a diff names each added, modified, deleted, binary, renamed and re-moded file, with text hunks', async () => {
  const { chain, history } = await setup();
  const diff = await history.diff(chain, 2);
  const byPath = Object.fromEntries(diff.files.map((f) => [f.path, f]));
  assert.deepEqual(
    diff.files.map((f) => [f.path, f.change]),
    [
      ['a.txt', 'modified'],
      ['c/new.txt', 'added'],
      ['dir/b.txt', 'deleted'],
      ['img.bin', 'modified'],
      ['new-name.txt', 'renamed'],
      ['run.sh', 'modified'],
    ],
  );
  assert.equal(byPath['a.txt']!.diff, '@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n');
  assert.equal(byPath['c/new.txt']!.diff, '@@ -0,0 +1 @@\n+fresh\n');
  assert.equal(byPath['dir/b.txt']!.diff, '@@ -1 +0,0 @@\n-bee\n');
  assert.equal(byPath['img.bin']!.binary, true);
  assert.equal(byPath['img.bin']!.diff, undefined);
  assert.deepEqual([byPath['img.bin']!.before!.size, byPath['img.bin']!.after!.size], [9, 18]);
  assert.equal(byPath['new-name.txt']!.from, 'old-name.txt');
  assert.equal(byPath['new-name.txt']!.diff, '');
  assert.deepEqual(
    [byPath['run.sh']!.before!.mode, byPath['run.sh']!.after!.mode],
    [0o644 & ~process.umask(), 0o755],
  );
  assert.deepEqual(diff.counts, { added: 1, modified: 3, deleted: 1, renamed: 1 });
  assert.equal(diff.truncated, false);
  const first = await history.diff(chain, 1);
  assert.deepEqual(first.counts, { added: 5, modified: 0, deleted: 0, renamed: 0 });
  assert.deepEqual((await history.diff(chain, 3)).files, [], 'a commit without a layer changed nothing');
});

test('the tree of an older version is listed and read, the current one too', async () => {
  const { chain, history } = await setup();
  const v1 = (await history.read(chain, 1, '')).info;
  assert.equal(v1.type, 'dir');
  assert.deepEqual(v1.type === 'dir' && v1.entries.map((e) => `${e.name}:${e.type}`), [
    'a.txt:file',
    'dir:dir',
    'img.bin:file',
    'old-name.txt:file',
    'run.sh:file',
  ]);
  const read = async (version: number, path: string) =>
    (await collect((await history.read(chain, version, path)).body!)).toString();
  assert.equal(await read(1, 'a.txt'), 'one\ntwo\nthree\n');
  assert.equal(await read(3, 'a.txt'), 'one\n2\nthree\nfour\n');
  assert.equal(await read(1, 'dir/b.txt'), 'bee\n');
  assert.deepEqual(
    await collect((await history.read(chain, 2, 'img.bin')).body!),
    Buffer.concat([BINARY, BINARY]),
  );
  await assert.rejects(
    history.read(chain, 2, 'dir/b.txt'),
    (e) => isBerthError(e) && e.code === 'WORKSPACE_PATH_NOT_FOUND',
  );
  assert.equal((await history.read(chain, 2, 'c')).info.type, 'dir');
  assert.deepEqual(await history.read(chain, 0, ''), {
    info: { type: 'dir', path: '', version: 0, entries: [] },
    body: null,
  });
  await assert.rejects(history.read(chain, 4, ''), (e) => isBerthError(e) && e.code === 'INVALID_INPUT');
});

test('after a snapshot, older versions and the diff that made it are refused, naming what is available', async () => {
  const { blobs, chain, history } = await setup();
  const tree = await scratch();
  await writeFile(join(tree, 'a.txt'), 'snap\n');
  const bytes = await collect(packTree(tree));
  await blobs.put('snapshots/v2', [bytes], { maxBytes: 1 << 30 });
  const compacted: WorkspaceChain = {
    ...chain,
    entries: [{ version: 2, kind: 'snapshot', key: 'snapshots/v2', size: bytes.length, turnId: null }],
  };
  const gone = (e: unknown) =>
    isBerthError(e) && e.code === 'VERSION_NOT_RETAINED' && /versions 2-3 are available/.test(e.message);
  await assert.rejects(history.read(compacted, 1, ''), gone);
  await assert.rejects(history.diff(compacted, 2), gone);
  assert.equal((await collect((await history.read(compacted, 2, 'a.txt')).body!)).toString(), 'snap\n');
  await assert.rejects(
    history.read(chain, 1, '', true),
    (e) => isBerthError(e) && e.code === 'VERSION_NOT_RETAINED',
  );
});

test('past the bounds a file shows its sizes and truncated, not its text', async () => {
  const { blobs, chain } = await setup();
  const small = new WorkspaceHistory(blobs, { ...DEFAULT_HISTORY_LIMITS, maxTextFileBytes: 10 });
  const diff = await small.diff(chain, 2);
  const a = diff.files.find((f) => f.path === 'a.txt')!;
  assert.deepEqual([a.truncated, a.diff, a.before!.size, a.after!.size], [true, undefined, 14, 17]);
  assert.equal(diff.truncated, true);
  const budget = new WorkspaceHistory(blobs, { ...DEFAULT_HISTORY_LIMITS, maxPatchBytes: 1 });
  const cut = await budget.diff(chain, 2);
  assert.equal(cut.files.filter((f) => f.diff).length, 1, 'the first diff spends the budget');
  assert.equal(cut.truncated, true);
  const held = new WorkspaceHistory(blobs, { ...DEFAULT_HISTORY_LIMITS, maxKeptBytes: 0 });
  const spent = await held.diff(chain, 2);
  assert.deepEqual(
    spent.files.map((f) => [f.path, f.change, f.diff === undefined, f.truncated ?? false]),
    [
      ['a.txt', 'modified', true, true],
      ['c/new.txt', 'added', true, true],
      ['dir/b.txt', 'deleted', true, true],
      ['img.bin', 'modified', true, false],
      ['new-name.txt', 'renamed', false, false],
      ['run.sh', 'modified', false, false],
    ],
    'with no content held, files show sizes (renames, mode changes and binaries still found: hashes and first bytes are kept)',
  );
});

test('objects packed before indices give the same diffs and reads, inflated whole', async () => {
  const now = await setup();
  const old = await setup({ indexed: false });
  for (const version of [1, 2, 3])
    assert.deepEqual(
      (await old.history.diff(old.chain, version)).files,
      (await now.history.diff(now.chain, version)).files,
      `diff of version ${version}`,
    );
  for (const [version, path] of [
    [1, 'a.txt'],
    [2, 'img.bin'],
    [3, 'c/new.txt'],
  ] as const)
    assert.deepEqual(
      await collect((await old.history.read(old.chain, version, path)).body!),
      await collect((await now.history.read(now.chain, version, path)).body!),
      `${path} at version ${version}`,
    );
});

test("a rewind's diff is the tree it went back to against the one before it, indexed or not", async () => {
  for (const indexed of [true, false]) {
    const { chain, history } = await setup({ indexed });
    const v1 = chain.entries[0]!;
    const rewound: WorkspaceChain = {
      sessionId: 's1',
      version: 4,
      entries: [{ ...v1, version: 4, kind: 'snapshot', turnId: null, rewoundTo: 1 }],
      history: [...chain.entries, { ...v1, version: 4, kind: 'snapshot', turnId: null, rewoundTo: 1 }],
    };
    const diff = await history.diff(rewound, 4);
    assert.deepEqual(
      diff.files.map((f) => [f.path, f.change, f.from ?? null]),
      [
        ['a.txt', 'modified', null],
        ['c/new.txt', 'deleted', null],
        ['dir/b.txt', 'added', null],
        ['img.bin', 'modified', null],
        ['old-name.txt', 'renamed', 'new-name.txt'],
        ['run.sh', 'modified', null],
      ],
      `indexed: ${indexed}`,
    );
    assert.equal(diff.files[0]!.diff, '@@ -1,4 +1,3 @@\n one\n-2\n+two\n three\n-four\n');
    assert.equal(diff.files.find((f) => f.path === 'img.bin')!.binary, true);
  }
});
