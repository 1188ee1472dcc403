/** Archive indices on real archives in a file blob store: every file read back by range, alone or batched; an unindexed archive has none. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { after, test } from 'node:test';
import { FileBlobStore } from '../blobs/index.js';
import { readArchiveIndex, readIndexedBytes, readIndexedContent, withoutIndex } from './archive-index.js';
import { packTree } from './layer-archive.js';

const root = await mkdtemp(join(tmpdir(), 'berth-archive-index-'));
after(() => rm(root, { recursive: true, force: true }));

test('an index lists every entry, and each file reads back by range, alone or batched', async () => {
  const tree = join(root, 'tree');
  const files: Record<string, Buffer> = {
    'big.bin': randomBytes(3 * 2 ** 20 + 17),
    'empty.txt': Buffer.alloc(0),
    'src/text.txt': Buffer.from('line\n'.repeat(30_000)),
  };
  for (let i = 0; i < 50; i++) files[`many/${i}.bin`] = randomBytes(i * 700);
  await mkdir(join(tree, 'src'), { recursive: true });
  await mkdir(join(tree, 'many'));
  for (const [path, bytes] of Object.entries(files)) await writeFile(join(tree, path), bytes);
  const blobs = new FileBlobStore(join(root, 'blobs'));
  const archive = await buffer(packTree(tree));
  await blobs.put('snapshots/a', [archive], { maxBytes: 1 << 30 });
  const index = (await readArchiveIndex(blobs, 'snapshots/a', archive.length))!;
  assert.ok(index.members.length > 10, 'cut into members');
  const indexed = index.entries.flatMap((e) => (e.t === 'file' ? [e] : []));
  assert.deepEqual(indexed.map((e) => e.p).sort(), Object.keys(files).sort());
  for (const e of indexed)
    assert.ok(
      (await buffer(readIndexedContent(blobs, 'snapshots/a', index, e.o, e.s))).equals(files[e.p]!),
      `${e.p} read alone`,
    );
  const batched = await readIndexedBytes(
    blobs,
    'snapshots/a',
    index,
    indexed.map((e) => ({ o: e.o, length: e.s })),
  );
  for (const [i, e] of indexed.entries()) assert.ok(batched[i]!.equals(files[e.p]!), `${e.p} read batched`);
  const unindexed = withoutIndex(archive);
  await blobs.put('snapshots/old', [unindexed], { maxBytes: 1 << 30 });
  assert.equal(await readArchiveIndex(blobs, 'snapshots/old', unindexed.length), null);
});
