import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { isBerthError } from '../core/index.js';
import { FileBlobStore } from './file-blob-store.js';
import { StorageBlobs } from './storage-blobs.js';

async function text(stream: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts).toString();
}

test('storage blobs: fresh names under storage/, mediated storage codes, legacy blobs moved in once', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-storage-blobs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const blobs = new FileBlobStore(join(dir, 'blobs'));
  await blobs.check();
  const storage = new StorageBlobs(blobs);

  const a = await storage.write(Readable.from([Buffer.from('same')]), { maxBytes: 10 });
  const b = await storage.write(Readable.from([Buffer.from('same')]), { maxBytes: 10 });
  assert.notEqual(a.blob, b.blob, 'no two puts share a blob');
  assert.equal(a.sha256, createHash('sha256').update('same').digest('hex'));
  assert.deepEqual(
    (await blobs.list('storage/')).objects.map((o) => o.key).sort(),
    [`storage/${a.blob}`, `storage/${b.blob}`].sort(),
  );
  assert.equal(await text(await storage.read(a.blob, { start: 1, end: 2 })), 'am');
  const codes = await Promise.all([
    storage.write(Readable.from([Buffer.from('too long')]), { maxBytes: 3 }).catch((e) => e.code),
    storage
      .write(Readable.from([Buffer.from('x')]), { maxBytes: 3, expectedSha256: a.sha256 })
      .catch((e) => e.code),
    storage.read('0'.repeat(32)).catch((e) => e.code),
  ]);
  assert.deepEqual(codes, ['STORAGE_OBJECT_TOO_LARGE', 'STORAGE_HASH_MISMATCH', 'STORAGE_BLOB_MISSING']);

  // A data dir from before the blob store: blobs in shards, named <sha256>.<id> by their rows.
  const legacy = join(dir, 'storage');
  const name = `${createHash('sha256').update('old').digest('hex')}.0123456789abcdef`;
  await mkdir(join(legacy, 'blobs', name.slice(0, 2)), { recursive: true });
  await mkdir(join(legacy, 'tmp'));
  await writeFile(join(legacy, 'blobs', name.slice(0, 2), name), 'old');
  await writeFile(join(legacy, 'tmp', 'cut.part'), 'half');
  assert.equal(await storage.adoptLegacy(legacy), 1);
  assert.equal(await text(await storage.read(name)), 'old', 'the row’s blob name still finds it');
  assert.equal(existsSync(legacy), false, 'the old dir is gone, its temp files with it');
  assert.equal(await storage.adoptLegacy(legacy), 0, 'once');

  // Garbage: only past the grace period, only what no row names.
  const named = new Set([a.blob, name]);
  assert.equal(await storage.collectGarbage(async (blob) => named.has(blob), Date.now()), 0);
  assert.equal(await storage.collectGarbage(async (blob) => named.has(blob), Date.now() + 3_600_000), 1);
  assert.deepEqual((await readdir(join(dir, 'blobs', 'storage'))).sort(), [a.blob, name].sort());
  assert.ok(isBerthError(await storage.read(b.blob).catch((e) => e), 'STORAGE_BLOB_MISSING'));
});
