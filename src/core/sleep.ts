/**
 * The one sleep: resolves after `ms`, or at once when `signal` aborts (already aborted
 * included). It never rejects, so a loop that sleeps between passes simply looks at its
 * own stop flag when it wakes; and it leaves no timer or abort listener behind either way.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener('abort', done, { once: true });
  });
}
