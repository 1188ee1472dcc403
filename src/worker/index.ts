/** worker: slots, claim loop, sweep, sandbox supervision. */
export { type HostPaths, hostPaths, installIdOf, sandboxName } from './paths.js';
export { Worker, type WorkerDeps } from './worker.js';
