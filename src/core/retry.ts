/**
 * The one retry loop: a call tried again after each failure it may retry, with the one
 * backoff between tries, until it succeeds or its budget is spent (a number of tries, or a
 * deadline no try may start after). Every "try again while X is away" of berth is this
 * loop with its own retryable test and budget; what to say on each retry and what to throw
 * when the budget is spent are the caller's.
 */
import { type Backoff, backoffMs } from './backoff.js';
import { sleep } from './sleep.js';

export interface RetryUntil {
  /** Whether the failure may be tried again; any other is thrown at once. */
  retryable(err: unknown): boolean;
  /** The delay before the next try; a function when it depends on the failure. */
  backoff: Backoff | ((err: unknown) => Backoff);
  /** At most this many tries. */
  tries?: number;
  /** No try starts after this time, on `now`'s clock: a delay that would pass it ends the loop. */
  deadline?: number;
  /** The clock of `deadline`; default Date.now. */
  now?: () => number;
  /** Told of each failure that will be tried again (after `delayMs`). */
  onRetry?(err: unknown, failures: number, delayMs: number): void;
  /** What to throw when the budget is spent; default the last failure. */
  spent?(err: unknown): unknown;
}

export async function retryUntil<T>(call: () => Promise<T>, o: RetryUntil): Promise<T> {
  const now = o.now ?? Date.now;
  for (let failures = 1; ; failures++) {
    try {
      return await call();
    } catch (err) {
      if (!o.retryable(err)) throw err;
      const delayMs = backoffMs(failures, typeof o.backoff === 'function' ? o.backoff(err) : o.backoff);
      const outOfTries = o.tries !== undefined && failures >= o.tries;
      const outOfTime = o.deadline !== undefined && now() + delayMs > o.deadline;
      if (outOfTries || outOfTime) throw o.spent ? o.spent(err) : err;
      o.onRetry?.(err, failures, delayMs);
      await sleep(delayMs);
    }
  }
}
