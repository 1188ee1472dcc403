/**
 * The `s3` backend: objects in a bucket of an S3-compatible service (AWS S3, Ceph RGW,
 * MinIO, SeaweedFS), under a key prefix, shared by every worker on every machine that
 * names it. Client: @aws-sdk/client-s3 v3, path-style when an endpoint is given.
 *
 * Invariants:
 * - A body that ends within one part is sent as one PutObject (with `If-None-Match: *`
 *   for `ifAbsent`: the service refuses a key that exists, atomically). A longer one is a
 *   multipart upload (lib-storage's Upload), after a HEAD for `ifAbsent`; Ceph Pacific
 *   ignores `If-None-Match` on CompleteMultipartUpload, so two racing multipart puts of
 *   one key may both complete: harmless for the content-addressed keys that need it, whose
 *   hash is checked before completion. Size and hash are checked as the body streams, so
 *   a bad body is never completed; a failed upload is aborted (and what a crash leaves is
 *   aborted by `abortIncomplete`). The object is read back with HEAD (Ceph answers
 *   CompleteMultipartUpload with an empty ETag).
 * - Garbage collection judges age by LastModified, which AWS sets to a multipart upload's
 *   start: a multipart put that took longer than `refreshAfterMs` re-copies the object
 *   onto itself, so its age counts from its end and it is not collected before its writer
 *   names it.
 * - Calls that can be repeated (get, head, list, delete, a one-part put) are retried with
 *   backoff on transient failures (5xx, socket errors); a get that fails mid-body resumes
 *   with a Range request from the byte it reached, pinned to the object's ETag. After the
 *   tries: BLOB_READ_FAILED or BLOB_WRITE_FAILED (retryable).
 * - Checksums only when an operation requires them (`WHEN_REQUIRED`): newer SDKs send
 *   trailing checksums that Ceph Pacific refuses for streamed bodies.
 */
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { BerthError, type BlobsConfig, backoffMs, isBerthError, sleep } from '../core/index.js';
import {
  assertBlobKey,
  assertBlobPrefix,
  BLOB_GRACE_MS,
  type BlobInfo,
  type BlobPage,
  type BlobRead,
  type BlobStore,
  BodyMeter,
  type ByteRange,
  drain,
  type PutOptions,
  type PutResult,
} from './blob-store.js';
import {
  describeCheckFailure,
  isTransientS3Error,
  readError,
  s3ErrorCode,
  s3Status,
  writeFailed,
} from './s3-errors.js';
import { type BlobRetry, DEFAULT_BLOB_RETRY, retrying } from './s3-retry.js';

export type S3BlobsConfig = Extract<BlobsConfig, { kind: 's3' }>;

/** S3's smallest part but the last is 5 MiB; a larger part means fewer requests per upload. */
const PART_BYTES = 8 * 1024 * 1024;
const UPLOAD_CONCURRENCY = 4;
const CONNECT_TIMEOUT_MS = 5_000;
/** A socket with no byte moving for this long is given up (a get resumes on a new one). */
const SOCKET_IDLE_MS = 60_000;
/** Written and deleted at start to prove the keys may write; no blob key starts with `.`. */
const CHECK_KEY = '.berth-check';

export interface S3BlobStoreOptions {
  retry?: BlobRetry;
  /** A multipart put that took longer than this re-copies its object onto itself. @default BLOB_GRACE_MS / 2 */
  refreshAfterMs?: number;
}

export class S3BlobStore implements BlobStore {
  readonly kind = 's3';
  readonly location: string;
  private readonly client: S3Client;
  /** lib-storage's parts, with the SDK's own few quick retries: a lost part would cost the whole upload. */
  private readonly uploadClient: S3Client;
  private readonly endpoint: string;
  private readonly retry: BlobRetry;
  private readonly refreshAfterMs: number;

  constructor(
    private readonly config: S3BlobsConfig,
    options: S3BlobStoreOptions = {},
  ) {
    this.endpoint = config.endpoint || `https://s3.${config.region}.amazonaws.com`;
    this.location = `s3://${config.bucket}/${config.prefix} at ${this.endpoint}`;
    this.retry = options.retry ?? DEFAULT_BLOB_RETRY;
    this.refreshAfterMs = options.refreshAfterMs ?? BLOB_GRACE_MS / 2;
    const base: S3ClientConfig = {
      region: config.region,
      credentials: { accessKeyId: config.accessKeyId, secretAccessKey: config.secretAccessKey },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, socketTimeout: SOCKET_IDLE_MS },
      ...(config.endpoint ? { endpoint: config.endpoint, forcePathStyle: true } : {}),
    };
    this.client = new S3Client({ ...base, maxAttempts: 1 });
    this.uploadClient = new S3Client({ ...base, maxAttempts: 3 });
  }

  async check(): Promise<void> {
    const { bucket } = this.config;
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: bucket }));
      const Key = this.config.prefix + CHECK_KEY;
      await this.client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: 'ok', ContentLength: 2 }));
      await this.client.send(new DeleteObjectCommand({ Bucket: bucket, Key }));
    } catch (err) {
      const { reason, fix } = describeCheckFailure(err, { bucket, endpoint: this.endpoint });
      throw new BerthError(
        'BLOBS_UNREACHABLE',
        `Blob store s3://${bucket}/${this.config.prefix}: ${reason}`,
        {
          cause: err,
          hint: `${fix[0]!.toUpperCase()}${fix.slice(1)} (docs/config.md).`,
        },
      );
    }
  }

  async put(
    key: string,
    body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    o: PutOptions,
  ): Promise<PutResult> {
    const Key = this.keyOf(key);
    const startedAt = performance.now(); // elapsed time, on the monotonic timer
    const meter = new BodyMeter(key, o);
    const chunks = meter.pass(body);
    const first: Buffer[] = [];
    let firstBytes = 0;
    let ended = false;
    while (firstBytes < PART_BYTES) {
      const next = await chunks.next();
      if (next.done) {
        ended = true;
        break;
      }
      first.push(next.value);
      firstBytes += next.value.length;
    }
    const Bucket = this.config.bucket;
    const IfNoneMatch = o.ifAbsent ? '*' : undefined;
    if (ended) {
      const data = Buffer.concat(first);
      try {
        await this.retrying(() =>
          this.client.send(
            new PutObjectCommand({ Bucket, Key, Body: data, ContentLength: data.length, IfNoneMatch }),
          ),
        );
        return meter.result(key, true);
      } catch (err) {
        // A retry of a put whose answer was lost may find its own object: it is there either way.
        if (o.ifAbsent && s3Status(err) === 412) return meter.result(key, false);
        throw writeFailed(key, err);
      }
    }
    const existing = o.ifAbsent
      ? await this.head(key).catch((err: unknown) => {
          throw writeFailed(key, err);
        })
      : null;
    if (existing) {
      await drain(chunks);
      return meter.result(key, false);
    }
    const upload = new Upload({
      client: this.uploadClient,
      params: { Bucket, Key, Body: Readable.from(prepend(first, chunks)), IfNoneMatch },
      partSize: PART_BYTES,
      queueSize: UPLOAD_CONCURRENCY,
      leavePartsOnError: false,
    });
    try {
      await upload.done();
    } catch (err) {
      if (isBerthError(err)) throw err; // the body's own size or hash, from the meter
      if (o.ifAbsent && s3Status(err) === 412) return meter.result(key, false);
      throw writeFailed(key, err);
    }
    const stored = await this.head(key).catch((err: unknown) => {
      throw writeFailed(key, err);
    });
    if (stored?.size !== meter.size)
      throw writeFailed(key, new Error(`read back ${stored?.size ?? 'no object'}, not ${meter.size} bytes`));
    if (performance.now() - startedAt > this.refreshAfterMs)
      await this.retrying(() =>
        this.client.send(
          new CopyObjectCommand({
            Bucket,
            Key,
            CopySource: `${Bucket}/${encodeURIComponent(Key).replaceAll('%2F', '/')}`,
            MetadataDirective: 'REPLACE',
          }),
        ),
      ).catch((err: unknown) => {
        throw writeFailed(key, err);
      });
    return meter.result(key, true);
  }

  async get(key: string, range?: ByteRange): Promise<BlobRead> {
    const Key = this.keyOf(key);
    const answer = await this.retrying(() =>
      this.client.send(
        new GetObjectCommand({
          Bucket: this.config.bucket,
          Key,
          ...(range ? { Range: `bytes=${range.start}-${range.end ?? ''}` } : {}),
        }),
      ),
    ).catch((err: unknown) => {
      throw readError(key, err, range);
    });
    const size = answer.ContentLength ?? 0;
    const totalSize = Number(/\/(\d+)$/.exec(answer.ContentRange ?? '')?.[1] ?? size);
    const start = range?.start ?? 0;
    const body = Readable.from(this.resumable(key, answer, start, start + size - 1));
    return { body, size, totalSize };
  }

  async head(key: string): Promise<BlobInfo | null> {
    const Key = this.keyOf(key);
    try {
      const h = await this.retrying(() =>
        this.client.send(new HeadObjectCommand({ Bucket: this.config.bucket, Key })),
      );
      return { key, size: h.ContentLength ?? 0, lastModifiedMs: h.LastModified?.getTime() ?? 0 };
    } catch (err) {
      if (s3Status(err) === 404) return null;
      throw readError(key, err);
    }
  }

  async list(prefix: string, page: { after?: string; limit?: number } = {}): Promise<BlobPage> {
    assertBlobPrefix(prefix);
    const base = this.config.prefix;
    const answer = await this.retrying(() =>
      this.client.send(
        new ListObjectsV2Command({
          Bucket: this.config.bucket,
          Prefix: base + prefix,
          MaxKeys: page.limit ?? 1000,
          ...(page.after ? { StartAfter: base + page.after } : {}),
        }),
      ),
    ).catch((err: unknown) => {
      throw readError(`${prefix}*`, err);
    });
    const all = (answer.Contents ?? []).map((o) => ({
      key: (o.Key ?? '').slice(base.length),
      size: o.Size ?? 0,
      lastModifiedMs: o.LastModified?.getTime() ?? 0,
    }));
    // Another tool's objects in a shared bucket are not blobs: not listed, never collected.
    const objects = all.filter((o) => isBlobKey(o.key));
    return { objects, next: answer.IsTruncated ? (all[all.length - 1]?.key ?? null) : null };
  }

  async delete(key: string): Promise<void> {
    const Key = this.keyOf(key);
    await this.retrying(() =>
      this.client.send(new DeleteObjectCommand({ Bucket: this.config.bucket, Key })),
    ).catch((err: unknown) => {
      throw new BerthError('BLOB_WRITE_FAILED', `Blob ${key} could not be deleted at ${this.location}`, {
        cause: err,
      });
    });
  }

  async abortIncomplete(before: number): Promise<number> {
    const Bucket = this.config.bucket;
    let aborted = 0;
    let marker: { KeyMarker?: string; UploadIdMarker?: string } = {};
    for (;;) {
      const page = await this.retrying(() =>
        this.client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: this.config.prefix, ...marker })),
      );
      for (const u of page.Uploads ?? []) {
        if (!u.Key || !u.UploadId || (u.Initiated?.getTime() ?? 0) >= before) continue;
        const { Key, UploadId } = u;
        await this.retrying(() =>
          this.client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId })),
        ).catch((err: unknown) => {
          if (s3ErrorCode(err) !== 'NoSuchUpload') throw err;
        });
        aborted++;
      }
      if (!page.IsTruncated) return aborted;
      marker = { KeyMarker: page.NextKeyMarker, UploadIdMarker: page.NextUploadIdMarker };
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
    this.uploadClient.destroy();
  }

  /** The body of a get; a transient failure mid-way re-requests the rest (same ETag) after a backoff. */
  private async *resumable(
    key: string,
    first: GetObjectCommandOutput,
    start: number,
    end: number,
  ): AsyncGenerator<Buffer> {
    let offset = start;
    let failures = 0;
    let current = first.Body as Readable;
    try {
      for (;;) {
        try {
          for await (const chunk of current) {
            offset += (chunk as Buffer).length;
            failures = 0;
            yield chunk as Buffer;
          }
          if (offset > end) return;
          throw Object.assign(new Error(`body of ${key} ended at byte ${offset} of ${end + 1}`), {
            code: 'ERR_STREAM_PREMATURE_CLOSE',
          });
        } catch (err) {
          current.destroy();
          failures++;
          if (!isTransientS3Error(err) || failures >= this.retry.tries) throw readError(key, err);
          await sleep(backoffMs(failures, this.retry));
          const rest = await this.retrying(() =>
            this.client.send(
              new GetObjectCommand({
                Bucket: this.config.bucket,
                Key: this.keyOf(key),
                Range: `bytes=${offset}-${end}`,
                IfMatch: first.ETag,
              }),
            ),
          ).catch((e: unknown) => {
            throw readError(key, e);
          });
          current = rest.Body as Readable;
        }
      }
    } finally {
      current.destroy();
    }
  }

  private retrying<T>(call: () => Promise<T>): Promise<T> {
    return retrying(this.retry, call);
  }

  private keyOf(key: string): string {
    return this.config.prefix + assertBlobKey(key);
  }
}

function isBlobKey(key: string): boolean {
  try {
    assertBlobKey(key);
    return true;
  } catch {
    return false;
  }
}

async function* prepend(first: Buffer[], rest: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  yield* first;
  yield* rest;
}
