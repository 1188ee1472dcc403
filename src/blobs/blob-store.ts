/**
 * The blob store: immutable objects under string keys, on one of two backends: `file` (a
 * dir of this machine, the embedded default) or `s3` (a bucket of any S3-compatible
 * service, shared by workers on many machines). What lives under which prefix:
 * `storage/` holds mediated storage's object contents (storage-blobs.ts); content-
 * addressed workspace layers (`layers/<sha256>`) and snapshots are to follow.
 *
 * Invariants (every backend; test/blobs/conformance.ts checks them):
 * - A put is whole or absent: a reader, a head or a listing never sees part of one, and a
 *   put that fails (size limit, hash mismatch, the service gone) leaves nothing visible.
 *   What a crash leaves (a temp file, an unfinished multipart upload) is invisible and is
 *   removed by `abortIncomplete` once older than the grace period.
 * - Objects are immutable by discipline: a key is written once. `ifAbsent` makes that the
 *   store's rule, for content-addressed keys and fresh names alike: a put of a key that
 *   exists stores nothing and answers `created: false`. Without it a put replaces.
 * - Every failure is a catalogue error: BLOB_NOT_FOUND, BLOB_TOO_LARGE,
 *   BLOB_HASH_MISMATCH, INVALID_INPUT (a key or range), and the retryable
 *   BLOB_WRITE_FAILED / BLOB_READ_FAILED once the backend's retries are spent.
 * - Garbage collection (`collectGarbage`) deletes an object only when no store row names
 *   it and it is older than the grace period: a writer names its object in the store
 *   within moments of its put, so a young object is never taken from under it.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { BerthError } from '../core/index.js';

/** An object (or an unfinished put) younger than this is never collected. */
export const BLOB_GRACE_MS = 10 * 60_000;
/** Longest key, in bytes (S3's limit); keys are ASCII. */
const MAX_KEY_BYTES = 1024;
const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}$/;
const LIST_PAGE = 1000;

export interface PutOptions {
  /** A body past this many bytes fails with BLOB_TOO_LARGE. */
  maxBytes: number;
  /** Hex SHA-256 the body must hash to (BLOB_HASH_MISMATCH otherwise), checked before the object is visible. */
  expectedSha256?: string;
  /** Store only when no object has the key; otherwise store nothing (`created: false`). */
  ifAbsent?: boolean;
}

export interface PutResult {
  key: string;
  /** Size and hex SHA-256 of the body sent (with `created: false`, of what was sent, not stored). */
  size: number;
  sha256: string;
  created: boolean;
}

export interface BlobInfo {
  key: string;
  size: number;
  /** When the backend last wrote it (epoch ms): the age garbage collection judges by. */
  lastModifiedMs: number;
}

/** Bytes `start` to `end`, inclusive; `end` defaults to the last byte and is cut to it. */
export interface ByteRange {
  start: number;
  end?: number;
}

export interface BlobRead {
  /** The bytes of the read; a backend's transient failure mid-stream is retried inside it. */
  body: Readable;
  /** Bytes in this read (the range's length). */
  size: number;
  /** Size of the whole object. */
  totalSize: number;
}

export interface BlobPage {
  objects: BlobInfo[];
  /** The `after` of the next page; null on the last. */
  next: string | null;
}

export interface BlobStore {
  readonly kind: 'file' | 's3';
  /** Where it is, for messages and logs (no secret): file:///dir, or s3://bucket/prefix at the endpoint. */
  readonly location: string;
  /** At start: refuses with BLOBS_UNREACHABLE (naming where and the fix) when the store cannot be used. */
  check(): Promise<void>;
  /** Streams `body` into `key`. See PutOptions and the invariants above. */
  put(
    key: string,
    body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    options: PutOptions,
  ): Promise<PutResult>;
  /** BLOB_NOT_FOUND when no object has the key; INVALID_INPUT for a range that starts past its end. */
  get(key: string, range?: ByteRange): Promise<BlobRead>;
  head(key: string): Promise<BlobInfo | null>;
  /** Objects whose key starts with `prefix`, in key order, after `after`; `limit` defaults to 1000. */
  list(prefix: string, page?: { after?: string; limit?: number }): Promise<BlobPage>;
  /** Idempotent: deleting a key that has no object is not an error. */
  delete(key: string): Promise<void>;
  /** Removes unfinished puts (temp files, multipart uploads) begun before `before` (epoch ms); returns how many. */
  abortIncomplete(before: number): Promise<number>;
  close(): Promise<void>;
}

/**
 * The key rules: 1-1024 bytes of segments separated by `/`, each of `A-Z a-z 0-9 . _ -`,
 * not starting with `.` (so never `.` or `..`, and never a backend's own `.tmp`). Keys
 * are made by berth, not by users; a bad one is a bug, refused before any I/O.
 */
export function assertBlobKey(key: string): string {
  if (key.length === 0 || key.length > MAX_KEY_BYTES || !key.split('/').every((s) => SEGMENT.test(s)))
    throw new BerthError(
      'INVALID_INPUT',
      `Blob key ${JSON.stringify(key.slice(0, 200))} breaks the key rules`,
    );
  return key;
}

/** A listing prefix: '' or the start of a valid key (it may end in `/` or mid-segment). */
export function assertBlobPrefix(prefix: string): string {
  if (prefix !== '') assertBlobKey(prefix.endsWith('/') ? `${prefix}x` : prefix);
  return prefix;
}

/** Inclusive bounds of `range` within an object of `size` bytes; INVALID_INPUT when it starts past the end. */
export function resolveRange(key: string, size: number, range?: ByteRange): { start: number; end: number } {
  if (!range) return { start: 0, end: size - 1 };
  const end = Math.min(range.end ?? size - 1, size - 1);
  if (!Number.isInteger(range.start) || range.start < 0 || range.start >= size || end < range.start)
    throw new BerthError(
      'INVALID_INPUT',
      `Range ${range.start}-${range.end ?? ''} is outside blob ${key} of ${size} bytes`,
    );
  return { start: range.start, end };
}

/**
 * Counts and hashes a put's body as it streams through: BLOB_TOO_LARGE as soon as it
 * passes the limit, BLOB_HASH_MISMATCH at its end, before the caller makes it visible.
 */
export class BodyMeter {
  size = 0;
  sha256 = '';
  private readonly hash = createHash('sha256');

  constructor(
    private readonly key: string,
    private readonly options: PutOptions,
  ) {}

  async *pass(body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): AsyncGenerator<Buffer> {
    for await (const chunk of body) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
      this.size += bytes.length;
      if (this.size > this.options.maxBytes)
        throw new BerthError(
          'BLOB_TOO_LARGE',
          `Blob ${this.key} is over ${this.options.maxBytes} bytes (put)`,
        );
      this.hash.update(bytes);
      yield bytes;
    }
    this.sha256 = this.hash.digest('hex');
    const expected = this.options.expectedSha256;
    if (expected !== undefined && expected !== this.sha256)
      throw new BerthError(
        'BLOB_HASH_MISMATCH',
        `Blob ${this.key} body hashes to sha256 ${this.sha256}, not the ${expected} it was sent with (put)`,
      );
  }

  result(key: string, created: boolean): PutResult {
    return { key, size: this.size, sha256: this.sha256, created };
  }
}

/** Reads an iterable to its end (a put that stores nothing still checks the whole body). */
export async function drain(body: AsyncIterable<unknown>): Promise<void> {
  const it = body[Symbol.asyncIterator]();
  while (!(await it.next()).done);
}

/**
 * Deletes the objects under `prefix` that no store row names (`isNamed`, per key) and
 * that are older than the grace period, and every unfinished put older than it. Returns
 * how many it removed. Safe with no lock between the processes sharing the store: a
 * young object is never touched, and its writer names it while it is young.
 */
export async function collectGarbage(
  blobs: BlobStore,
  o: { prefix: string; isNamed: (key: string) => Promise<boolean>; now: number; graceMs?: number },
): Promise<number> {
  const before = o.now - (o.graceMs ?? BLOB_GRACE_MS);
  let removed = await blobs.abortIncomplete(before);
  let after: string | undefined;
  do {
    const page = await blobs.list(o.prefix, { ...(after === undefined ? {} : { after }), limit: LIST_PAGE });
    for (const object of page.objects) {
      if (object.lastModifiedMs >= before || (await o.isNamed(object.key))) continue;
      await blobs.delete(object.key);
      removed++;
    }
    after = page.next ?? undefined;
  } while (after !== undefined);
  return removed;
}
