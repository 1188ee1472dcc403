/** worker: slots, claim loop, sweep, sandbox supervision. */

export type { WorkerDeps } from './deps.js';
export { sandboxName } from './paths.js';
export { ScheduleRunner } from './schedule-runner.js';
export { SELF_FENCE_LOG, Worker } from './worker.js';
export { WorkspaceBudget, type WorkspaceCacheStats } from './workspace-budget.js';
