/** worker: slots, claim loop, sweep, sandbox supervision. */
export { hostPaths, type HostPaths, installIdOf, sandboxName } from './paths.js';
export { Worker, type WorkerDeps } from './worker.js';
