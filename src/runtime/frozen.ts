/**
 * A piece of work done while a sandbox is frozen (a capture's scan and pack): the sandbox is
 * thawed when it ends, in every case, before the caller goes on to anything that waits on
 * the network. Where the engine has no freeze, the work runs with the sandbox running.
 */
import type { SandboxHandle, SandboxRuntime } from './runtime.js';

export interface FrozenTimings {
  /** Freezing it took, ms; null when the engine has no freeze. */
  freezeMs: number | null;
  /** From the freeze asked to the thaw done: how long its processes stood still, ms (null: never). */
  pauseMs: number | null;
}

export async function whileFrozen<T>(
  runtime: Pick<SandboxRuntime, 'freeze' | 'thaw'>,
  handle: Pick<SandboxHandle, 'id' | 'name'>,
  work: () => Promise<T>,
): Promise<{ value: T } & FrozenTimings> {
  const startedAt = performance.now();
  if (!(await runtime.freeze(handle))) return { value: await work(), freezeMs: null, pauseMs: null };
  const freezeMs = performance.now() - startedAt;
  let value: T;
  try {
    value = await work();
  } finally {
    await runtime.thaw(handle);
  }
  return { value, freezeMs, pauseMs: performance.now() - startedAt };
}
