/**
 * The content of mediated-storage objects (issue 7), as files under <data>/storage that
 * no sandbox ever mounts. A put streams its body to a temp file, hashing (SHA-256) and
 * counting as it goes, fsyncs it, renames it to a fresh blob name and fsyncs the
 * directory: a blob is whole or absent, never half written. Which blob an object's key
 * names is recorded afterwards in the store, fenced; the store row is the truth.
 *
 * Invariants:
 * - A blob is written once, under a name no other put uses (its hash plus a random id),
 *   and never changed. Blobs are not shared between puts (no deduplication): so a
 *   garbage collection can never delete a blob that a concurrent put is about to name,
 *   with no lock between the processes sharing the data dir.
 * - Garbage collection deletes a blob only when no store row names it and it is older
 *   than the grace period (a put names its blob within moments of writing it), and temp
 *   files older than the grace period (puts cut by a crash).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, type ReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { BerthError } from '../core/index.js';
import { fsyncPath } from '../workspace/index.js';

/** A blob or temp file younger than this is never collected. */
export const BLOB_GRACE_MS = 10 * 60_000;
const BLOB_NAME = /^[0-9a-f]{64}\.[0-9a-f]{16}$/;

export interface WrittenBlob {
  blob: string;
  sha256: string;
  size: number;
}

export class BlobStore {
  private readonly blobsDir: string;
  private readonly tmpDir: string;

  constructor(readonly dir: string) {
    this.blobsDir = join(dir, 'blobs');
    this.tmpDir = join(dir, 'tmp');
  }

  async prepare(): Promise<void> {
    await mkdir(this.blobsDir, { recursive: true, mode: 0o700 });
    await mkdir(this.tmpDir, { recursive: true, mode: 0o700 });
  }

  /**
   * Streams `body` into a new blob. Throws STORAGE_OBJECT_TOO_LARGE past `maxBytes` and
   * STORAGE_HASH_MISMATCH when `expectedSha256` is given and differs; either way nothing
   * is left behind.
   */
  async write(
    body: AsyncIterable<Buffer>,
    o: { maxBytes: number; expectedSha256?: string },
  ): Promise<WrittenBlob> {
    const id = randomBytes(8).toString('hex');
    const tmp = join(this.tmpDir, `${id}.part`);
    const hash = createHash('sha256');
    let size = 0;
    const file = await open(tmp, 'wx', 0o600);
    try {
      for await (const chunk of body) {
        size += chunk.length;
        if (size > o.maxBytes)
          throw new BerthError('STORAGE_OBJECT_TOO_LARGE', `Storage object over ${o.maxBytes} bytes (put)`);
        hash.update(chunk);
        await file.write(chunk);
      }
      await file.sync();
    } catch (err) {
      await file.close();
      await rm(tmp, { force: true });
      throw err;
    }
    await file.close();
    const sha256 = hash.digest('hex');
    if (o.expectedSha256 !== undefined && o.expectedSha256 !== sha256) {
      await rm(tmp, { force: true });
      throw new BerthError(
        'STORAGE_HASH_MISMATCH',
        `Storage put body hashes to sha256 ${sha256}, not the ${o.expectedSha256} it was sent with`,
      );
    }
    const blob = `${sha256}.${id}`;
    const dir = join(this.blobsDir, sha256.slice(0, 2));
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await rename(tmp, join(dir, blob));
    await fsyncPath(dir); // the rename is durable before the store row names the blob
    return { blob, sha256, size };
  }

  /** A stream of the blob's bytes from `start` to `end` inclusive (the whole blob by default). */
  async read(blob: string, range: { start?: number; end?: number } = {}): Promise<ReadStream> {
    const path = this.pathOf(blob);
    // Opened before the stream is returned, so a missing blob is an error the caller can still answer with.
    const file = await open(path, 'r').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT')
        throw new BerthError('STORAGE_BLOB_MISSING', `Storage blob ${blob} is missing from ${this.blobsDir}`);
      throw err;
    });
    return createReadStream('', { fd: file, autoClose: true, ...range });
  }

  /**
   * Deletes blobs no object names (asked of `isNamed`, per blob) and temp files, both only
   * past the grace period. Returns how many files it removed.
   */
  async collectGarbage(isNamed: (blob: string) => Promise<boolean>, now: number): Promise<number> {
    const old = async (path: string) => {
      const s = await stat(path).catch(() => null);
      return s !== null && s.mtimeMs < now - BLOB_GRACE_MS;
    };
    let removed = 0;
    for (const name of await readdir(this.tmpDir).catch(() => [])) {
      const path = join(this.tmpDir, name);
      if (await old(path)) {
        await rm(path, { force: true });
        removed++;
      }
    }
    for (const shard of await readdir(this.blobsDir).catch(() => [])) {
      for (const blob of await readdir(join(this.blobsDir, shard)).catch(() => [])) {
        const path = join(this.blobsDir, shard, blob);
        if (!BLOB_NAME.test(blob) || !(await old(path)) || (await isNamed(blob))) continue;
        await rm(path, { force: true });
        removed++;
      }
    }
    return removed;
  }

  private pathOf(blob: string): string {
    // Blob names come from the store, written by write() above; anything else is refused.
    if (!BLOB_NAME.test(blob))
      throw new BerthError(
        'STORAGE_BLOB_MISSING',
        `Storage blob name ${JSON.stringify(blob)} is not one berth writes`,
      );
    return join(this.blobsDir, blob.slice(0, 2), blob);
  }
}
