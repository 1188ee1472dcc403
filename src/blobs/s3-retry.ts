/** Retries of the s3 backend's repeatable calls, with the one backoff on transient failures. */
import { type Backoff, retryUntil } from '../core/index.js';
import { isTransientS3Error } from './s3-errors.js';

/** At most `tries` tries of a repeatable call, with the backoff between them. */
export interface BlobRetry extends Backoff {
  tries: number;
}

/** About 10 s of tries: a restarting S3 daemon is waited for, a dead one reported. */
export const DEFAULT_BLOB_RETRY: BlobRetry = { tries: 8, firstMs: 250, maxMs: 2_000 };

/** `call`, again after a backoff while it fails transiently, at most `retry.tries` times. */
export function retrying<T>(retry: BlobRetry, call: () => Promise<T>): Promise<T> {
  return retryUntil(call, { retryable: isTransientS3Error, backoff: retry, tries: retry.tries });
}
