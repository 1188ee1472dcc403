/**
 * Mediated storage's object contents in the blob store: one object per put, under
 * `storage/<blob>`, where `<blob>` is a fresh random name that the store row of the
 * agent's key then names (the row is the truth; an object no row names is garbage).
 *
 * Invariants:
 * - A blob is written once, `ifAbsent`, under a name no other put uses, and never
 *   changed. Blobs are not shared between puts (no deduplication): so garbage collection
 *   can never delete a blob that a concurrent put is about to name, with no lock between
 *   the processes (or machines) sharing the blob store.
 * - Errors are mediated storage's: a body over the limit is STORAGE_OBJECT_TOO_LARGE, one
 *   that hashes otherwise STORAGE_HASH_MISMATCH, a row whose blob is gone
 *   STORAGE_BLOB_MISSING (each with the blob store's error as its cause).
 * - Blobs of data dirs from before the blob store (files under `<data>/storage/blobs`,
 *   named `<sha256>.<id>`, which their rows name) are moved in once, at worker start.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readdir, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { BerthError, isBerthError } from '../core/index.js';
import { type BlobStore, collectGarbage } from './blob-store.js';

/** Where mediated storage's blobs live in the blob store. */
export const STORAGE_BLOB_PREFIX = 'storage/';
const LEGACY_BLOB = /^[0-9a-f]{64}\.[0-9a-f]{16}$/;

export interface WrittenBlob {
  blob: string;
  sha256: string;
  size: number;
}

export class StorageBlobs {
  constructor(private readonly blobs: BlobStore) {}

  /**
   * Streams `body` into a new blob. STORAGE_OBJECT_TOO_LARGE past `maxBytes`,
   * STORAGE_HASH_MISMATCH when `expectedSha256` is given and differs; either way nothing
   * is stored.
   */
  async write(
    body: AsyncIterable<Uint8Array>,
    o: { maxBytes: number; expectedSha256?: string },
  ): Promise<WrittenBlob> {
    const blob = randomBytes(16).toString('hex');
    try {
      const put = await this.blobs.put(STORAGE_BLOB_PREFIX + blob, body, { ...o, ifAbsent: true });
      return { blob, sha256: put.sha256, size: put.size };
    } catch (err) {
      if (isBerthError(err, 'BLOB_TOO_LARGE'))
        throw new BerthError('STORAGE_OBJECT_TOO_LARGE', `Storage object over ${o.maxBytes} bytes (put)`, {
          cause: err,
        });
      if (isBerthError(err, 'BLOB_HASH_MISMATCH'))
        throw new BerthError('STORAGE_HASH_MISMATCH', `Storage put: ${err.message}`, { cause: err });
      throw err;
    }
  }

  /** A stream of the blob's bytes from `start` to `end` inclusive (the whole blob by default). */
  async read(blob: string, range?: { start: number; end: number }): Promise<Readable> {
    try {
      return (await this.blobs.get(STORAGE_BLOB_PREFIX + blob, range)).body;
    } catch (err) {
      if (isBerthError(err, 'BLOB_NOT_FOUND'))
        throw new BerthError(
          'STORAGE_BLOB_MISSING',
          `Storage blob ${blob} is missing from ${this.blobs.location}`,
          {
            cause: err,
          },
        );
      throw err;
    }
  }

  /** Deletes blobs no object names (asked of `isNamed`, per blob) and unfinished puts, past the grace period. */
  collectGarbage(isNamed: (blob: string) => Promise<boolean>, now: number): Promise<number> {
    return collectGarbage(this.blobs, {
      prefix: STORAGE_BLOB_PREFIX,
      isNamed: (key) => isNamed(key.slice(STORAGE_BLOB_PREFIX.length)),
      now,
    });
  }

  /** Moves the blobs of a data dir from before the blob store (`legacyDir` = <data>/storage) in, then removes them. */
  async adoptLegacy(legacyDir: string): Promise<number> {
    const root = join(legacyDir, 'blobs');
    const shards = await readdir(root).catch(() => [] as string[]);
    let moved = 0;
    for (const shard of shards) {
      for (const name of await readdir(join(root, shard)).catch(() => [] as string[])) {
        if (!LEGACY_BLOB.test(name)) continue;
        const path = join(root, shard, name);
        await this.blobs.put(STORAGE_BLOB_PREFIX + name, createReadStream(path), {
          maxBytes: Number.POSITIVE_INFINITY,
          ifAbsent: true,
        });
        await rm(path, { force: true });
        moved++;
      }
      await rmdir(join(root, shard)).catch(() => undefined);
    }
    // Its temp files are of puts cut by a crash: garbage. Dirs go only when empty.
    await rm(join(legacyDir, 'tmp'), { recursive: true, force: true });
    for (const dir of [root, legacyDir]) await rmdir(dir).catch(() => undefined);
    return moved;
  }
}
