/** chaos: fault injection against real berth processes, the invariant checker and the report. */

export type { ChaosReport } from './build-report.js';
export type { ChaosOptions, ChaosProgress } from './chaos-options.js';
export { BERTH_BIN, freePort } from './children.js';
export type {
  Fault,
  Partition,
  PrimaryDeath,
  SandboxKill,
  StoreFailover,
  WorkerKill,
} from './fault-records.js';
export { runningTurnsIn } from './fault-records.js';
export { sandboxKillHits } from './fault-timing.js';
export { FaultInjector } from './faults/index.js';
export { CHAOS_INVARIANTS, type InvariantResult } from './invariant-result.js';
export { checkInvariants, type ProcessEnd } from './invariants.js';
export { NodeSet } from './node-set.js';
export {
  type PatroniCluster,
  type PatroniMemberStatus,
  requirePatroni,
  startPatroniCluster,
} from './patroni-cluster.js';
export { type PostgresCluster, startPostgresCluster } from './postgres-cluster.js';
export { readdirIfPresent, readProcIfAlive } from './read-if-present.js';
export { renderReport } from './render-report.js';
export { runChaos } from './run-chaos.js';
export { assertCephInstalled, type S3Service, startS3Service } from './s3-service.js';
export type { Outcome, RequestRecord } from './session-driver.js';
export { readStoreSnapshot } from './snapshot.js';
export { requireNetworkNamespaces } from './worker-network.js';
export { expectedLog, turnPlan } from './workload.js';
