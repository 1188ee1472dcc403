/** worker: slots, claim loop, sweep, sandbox supervision. */

export type { WorkerDeps } from './deps.js';
export { type HostPaths, hostPaths, installIdOf, sandboxName } from './paths.js';
export { ScheduleRunner } from './schedule-runner.js';
export { SELF_FENCE_LOG, Worker } from './worker.js';
export { WorkspaceBudget, type WorkspaceCacheStats } from './workspace-budget.js';
