/** A sandbox lifecycle for tests that drive one by hand: worker w1, the system clock. */
import { SandboxLifecycle, type SandboxPhase } from '../../src/core/index.js';

export function testLifecycle(
  name: string,
  onMove?: (from: SandboxPhase, to: SandboxPhase, why: string) => void,
  pooled = false,
): SandboxLifecycle {
  return new SandboxLifecycle(name, {
    workerId: 'w1',
    pooled,
    now: () => Date.now(),
    ...(onMove ? { onMove } : {}),
  });
}
