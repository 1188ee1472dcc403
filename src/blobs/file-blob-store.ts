/**
 * The `file` backend: objects as files under one dir of this machine (`<key>` is the path
 * below it), the embedded default (`<data>/blobs`). Serves one machine: the processes
 * sharing its data dir.
 *
 * Invariants:
 * - A put streams to a fresh temp file under `<dir>/.tmp` (no key starts with `.`),
 *   hashing and counting as it goes, fsyncs it, then makes it the object in one step:
 *   `link` (fails when the key exists: `ifAbsent` is atomic) or `rename` (replaces), and
 *   fsyncs the directories it changed. A file is whole or absent, never half written.
 * - Directories are never removed, so a put's `mkdir` can never lose a race with a delete.
 * - A listing walks the tree in key order (a directory sorts as its name plus `/`, as its
 *   keys do) and skips subtrees that hold nothing after `after` or under the prefix.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, link, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { asDiskFull, BerthError, isBerthError, isNoSpace } from '../core/index.js';
import { fsyncPath } from '../durable-files/index.js';
import {
  assertBlobKey,
  assertBlobPrefix,
  type BlobInfo,
  type BlobPage,
  type BlobRead,
  type BlobStore,
  BodyMeter,
  type ByteRange,
  drain,
  type PutOptions,
  type PutResult,
  resolveRange,
} from './blob-store.js';

const TMP = '.tmp';
/** Bytes per read of an object: each is one job on the thread pool (the default, 64 KiB, makes 16 per MiB). */
const READ_CHUNK_BYTES = 1 << 20;

export class FileBlobStore implements BlobStore {
  readonly kind = 'file';
  readonly location: string;
  private readonly tmpDir: string;

  constructor(readonly dir: string) {
    this.location = pathToFileURL(dir).href;
    this.tmpDir = join(dir, TMP);
  }

  async check(): Promise<void> {
    try {
      await mkdir(this.tmpDir, { recursive: true, mode: 0o700 });
      await access(this.dir, constants.W_OK);
    } catch (err) {
      throw new BerthError(
        'BLOBS_UNREACHABLE',
        `Blob dir ${this.dir} cannot be used (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
        {
          cause: err,
          hint: 'Make it a dir the berth user can write, or set --blobs / BERTH_BLOBS to one (file:///dir).',
        },
      );
    }
  }

  async put(
    key: string,
    body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    o: PutOptions,
  ): Promise<PutResult> {
    const path = this.pathOf(key);
    const meter = new BodyMeter(key, o);
    if (o.ifAbsent && (await exists(path))) {
      await drain(meter.pass(body));
      return meter.result(key, false);
    }
    const tmp = join(this.tmpDir, `${randomBytes(8).toString('hex')}.part`);
    try {
      const file = await open(tmp, 'wx', 0o600).catch(async (err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
        await mkdir(this.tmpDir, { recursive: true, mode: 0o700 });
        return open(tmp, 'wx', 0o600);
      });
      try {
        for await (const chunk of meter.pass(body)) await file.write(chunk);
        await file.sync();
      } finally {
        await file.close();
      }
      const made = await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      let created = true;
      if (o.ifAbsent) {
        created = await link(tmp, path).then(
          () => true,
          (err: NodeJS.ErrnoException) => {
            if (err.code === 'EEXIST') return false;
            throw err;
          },
        );
        await rm(tmp, { force: true });
      } else await rename(tmp, path);
      // Durable before the caller names it: the file's dir, and each dir that got a new entry.
      const top = made === undefined ? dirname(path) : dirname(made);
      for (let d = dirname(path); ; d = dirname(d)) {
        await fsyncPath(d);
        if (d === top || d.length <= this.dir.length) break;
      }
      return meter.result(key, created);
    } catch (err) {
      await rm(tmp, { force: true });
      if (isBerthError(err)) throw err;
      // A full disk is no outage to wait out: it fails the write at once, and its turn is retried.
      if (isNoSpace(err)) throw asDiskFull(err, `writing blob ${key}`);
      throw new BerthError('BLOB_WRITE_FAILED', `Blob ${key} could not be written under ${this.dir} (put)`, {
        cause: err,
      });
    }
  }

  async get(key: string, range?: ByteRange): Promise<BlobRead> {
    const path = this.pathOf(key);
    // Opened before returning, so a missing object is an error the caller can still answer with.
    const file = await open(path, 'r').catch((err: NodeJS.ErrnoException) => {
      throw readError(key, err);
    });
    try {
      const totalSize = (await file.stat()).size;
      if (totalSize === 0 && !range) {
        await file.close();
        return { body: Readable.from([]), size: 0, totalSize };
      }
      const { start, end } = resolveRange(key, totalSize, range);
      return {
        body: file.createReadStream({ start, end, highWaterMark: READ_CHUNK_BYTES }),
        size: end - start + 1,
        totalSize,
      };
    } catch (err) {
      await file.close();
      throw err;
    }
  }

  async head(key: string): Promise<BlobInfo | null> {
    const s = await stat(this.pathOf(key)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
      throw readError(key, err);
    });
    return s?.isFile() ? { key, size: s.size, lastModifiedMs: s.mtimeMs } : null;
  }

  async list(prefix: string, page: { after?: string; limit?: number } = {}): Promise<BlobPage> {
    assertBlobPrefix(prefix);
    const limit = page.limit ?? 1000;
    const objects: BlobInfo[] = [];
    const base = prefix.slice(0, prefix.lastIndexOf('/') + 1);
    await this.walk(base, { prefix, after: page.after ?? '', want: limit + 1 }, objects);
    const more = objects.length > limit;
    if (more) objects.length = limit;
    return { objects, next: more ? objects[objects.length - 1]!.key : null };
  }

  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    try {
      await rm(path, { force: true });
      await fsyncPath(dirname(path)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    } catch (err) {
      throw new BerthError('BLOB_WRITE_FAILED', `Blob ${key} could not be deleted under ${this.dir}`, {
        cause: err,
      });
    }
  }

  async abortIncomplete(before: number): Promise<number> {
    let removed = 0;
    for (const name of await readdir(this.tmpDir).catch(() => [])) {
      const path = join(this.tmpDir, name);
      const s = await stat(path).catch(() => null);
      if (s === null || s.mtimeMs >= before) continue;
      await rm(path, { force: true });
      removed++;
    }
    return removed;
  }

  async close(): Promise<void> {}

  /** Appends the objects of dir `rel` ('' or ending in `/`) to `out`, in key order, until it holds `want`. */
  private async walk(
    rel: string,
    o: { prefix: string; after: string; want: number },
    out: BlobInfo[],
  ): Promise<void> {
    const entries = await readdir(join(this.dir, rel), { withFileTypes: true }).catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return [];
        throw readError(rel, err);
      },
    );
    const named = entries
      .filter((e) => !e.name.startsWith('.') && (e.isFile() || e.isDirectory()))
      .map((e) => ({ key: `${rel}${e.name}${e.isDirectory() ? '/' : ''}`, isDir: e.isDirectory() }))
      .sort((a, b) => (a.key < b.key ? -1 : 1));
    for (const { key, isDir } of named) {
      if (out.length >= o.want) return;
      if (isDir) {
        const underPrefix = key.startsWith(o.prefix) || o.prefix.startsWith(key);
        // Every key below sorts before `after` when `after` passes the dir's name without entering it.
        const allBefore = o.after > key && !o.after.startsWith(key);
        if (underPrefix && !allBefore) await this.walk(key, o, out);
      } else if (key.startsWith(o.prefix) && key > o.after) {
        const s = await stat(join(this.dir, key)).catch(() => null); // deleted meanwhile: not listed
        if (s) out.push({ key, size: s.size, lastModifiedMs: s.mtimeMs });
      }
    }
  }

  private pathOf(key: string): string {
    const path = join(this.dir, assertBlobKey(key));
    // The key rules already keep it inside; this keeps it so whatever they become.
    if (relative(this.dir, path).split(sep)[0] === '..')
      throw new Error(`Blob key ${key} leaves ${this.dir}`);
    return path;
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

function readError(key: string, err: NodeJS.ErrnoException): BerthError {
  if (err.code === 'ENOENT' || err.code === 'ENOTDIR')
    return new BerthError('BLOB_NOT_FOUND', `Blob ${key} does not exist`, { cause: err });
  return new BerthError('BLOB_READ_FAILED', `Blob ${key} could not be read (${err.code ?? err.message})`, {
    cause: err,
  });
}
