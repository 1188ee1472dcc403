/**
 * The one backoff: exponential with a cap. Every loop that waits between failed tries
 * (a message's retry, a webhook delivery, a warm sandbox that failed to start, a store
 * that went away, a dropped listener) takes its delay from here, so "1 s, 2 s, 4 s, … at
 * most 60 s" means the same wherever it is configured. Pure: the caller counts failures.
 */

export interface Backoff {
  /** The delay after the first failure, in ms. */
  firstMs: number;
  /** No delay is longer, in ms. */
  maxMs: number;
}

/** The delay after the n-th failure in a row (1-based): firstMs × 2^(n−1), at most maxMs; n below 1 counts as 1. */
export function backoffMs(failures: number, backoff: Backoff): number {
  return Math.min(backoff.maxMs, backoff.firstMs * 2 ** Math.max(0, failures - 1));
}
