/**
 * What an S3 service's failure means for berth: whether a later try may succeed (retried
 * with backoff), which catalogue error it becomes, and, at start, what is misconfigured
 * and how to fix it, in one line. Pure: no I/O.
 */
import { BerthError, isBerthError } from '../core/index.js';
import type { ByteRange } from './blob-store.js';

/** Errors of the socket, not of the service's answer: the service is away or restarting. */
const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ECONNABORTED',
  'ERR_STREAM_PREMATURE_CLOSE',
]);

interface SdkError {
  name?: string;
  code?: string;
  Code?: string;
  cause?: unknown;
  $metadata?: { httpStatusCode?: number };
}

/** The HTTP status of the service's answer; undefined when there was none (a socket error). */
export function s3Status(err: unknown): number | undefined {
  return (err as SdkError | undefined)?.$metadata?.httpStatusCode;
}

/** The S3 error code (NoSuchBucket, SignatureDoesNotMatch, …) or socket error code (ECONNREFUSED). */
export function s3ErrorCode(err: unknown): string {
  const e = err as SdkError | undefined;
  const cause = e?.cause as SdkError | undefined;
  return e?.Code ?? e?.code ?? cause?.code ?? e?.name ?? String(err);
}

/** A 5xx, 429 or 408 answer, a timeout, or a socket error: worth another try. */
export function isTransientS3Error(err: unknown): boolean {
  const status = s3Status(err);
  if (status !== undefined) return status >= 500 || status === 429 || status === 408;
  const e = err as SdkError | undefined;
  if (e?.name === 'TimeoutError' || e?.name === 'RequestTimeout') return true;
  return NETWORK_CODES.has(s3ErrorCode(err));
}

/** Why the start-up check of a bucket failed, and the fix, from what the service answered. */
export function describeCheckFailure(
  err: unknown,
  where: { bucket: string; endpoint: string },
): { reason: string; fix: string } {
  const status = s3Status(err);
  const code = s3ErrorCode(err);
  const keys = 'AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY';
  if (status === undefined)
    return {
      reason: `the S3 service at ${where.endpoint} is unreachable (${code})`,
      fix: 'start the S3 service, or point AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) at it',
    };
  if (status === 404 || code === 'NoSuchBucket')
    return {
      reason: `bucket ${where.bucket} does not exist at ${where.endpoint}`,
      fix: `create it (aws s3 mb s3://${where.bucket} --endpoint-url ${where.endpoint}), or name an existing bucket in --blobs / BERTH_BLOBS`,
    };
  if (status === 301 || code === 'PermanentRedirect' || code === 'AuthorizationHeaderMalformed')
    return {
      reason: `bucket ${where.bucket} is in another region than AWS_REGION (${status} ${code})`,
      fix: "set AWS_REGION to the bucket's region",
    };
  if (status === 403 || status === 401)
    return {
      reason: `the S3 service at ${where.endpoint} refused the keys for bucket ${where.bucket} (${status} ${code})`,
      fix: `check ${keys}: a user's keys allowed to read, write, list and delete in the bucket`,
    };
  return {
    reason: `the S3 service at ${where.endpoint} answered ${status} ${code} for bucket ${where.bucket}`,
    fix: `check that AWS_ENDPOINT_URL_S3 is an S3 service and that ${keys} may use the bucket`,
  };
}

/** "503 ServiceUnavailable", or "ECONNREFUSED" when the service did not answer. */
function answerOf(err: unknown): string {
  return [s3Status(err), s3ErrorCode(err)].filter((part) => part !== undefined).join(' ');
}

export function writeFailed(key: string, err: unknown): BerthError {
  return new BerthError(
    'BLOB_WRITE_FAILED',
    `Blob ${key} could not be stored (${answerOf(err)}); nothing of it is visible (put)`,
    { cause: err },
  );
}

export function readError(key: string, err: unknown, range?: ByteRange): BerthError {
  if (isBerthError(err)) return err;
  const status = s3Status(err);
  if (status === 404) return new BerthError('BLOB_NOT_FOUND', `Blob ${key} does not exist`, { cause: err });
  if (status === 416)
    return new BerthError(
      'INVALID_INPUT',
      `Range ${range?.start}-${range?.end ?? ''} is outside blob ${key}`,
      {
        cause: err,
      },
    );
  return new BerthError(
    'BLOB_READ_FAILED',
    `Blob ${key} could not be read (${answerOf(err)}) after retries`,
    {
      cause: err,
    },
  );
}
