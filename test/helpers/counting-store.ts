/** A store whose reads an SSE stream could make are counted: what the change feed's tests and bench compare. */
import type { Store } from '../../src/store/index.js';

export const STREAM_READS = [
  'eventsAfter',
  'eventLog',
  'lastEventId',
  'queuePositions',
  'getSessionView',
] as const;

/** `store`, with each call of the `STREAM_READS` methods counted; `reads()` is the count so far. */
export function countingStreamReads(store: Store): { store: Store; reads: () => number } {
  let reads = 0;
  const wrapped = Object.create(store) as Store;
  for (const name of STREAM_READS) {
    const original = (store[name] as (...args: unknown[]) => unknown).bind(store);
    Object.assign(wrapped, {
      [name]: (...args: unknown[]) => {
        reads++;
        return original(...args);
      },
    });
  }
  return { store: wrapped, reads: () => reads };
}
