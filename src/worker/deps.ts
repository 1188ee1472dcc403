/** What a worker and each of its session supervisors are given by the host. */
import type { Logger } from 'pino';
import type { BlobStore } from '../blobs/index.js';
import type { Clock, HostPaths, ResolvedConfig } from '../core/index.js';
import type { EgressInterceptor, SecretSource } from '../gateway/index.js';
import type { SandboxRuntime } from '../runtime/index.js';
import type { WorkerStore } from '../store/index.js';
import type { Workspaces } from '../workspace/index.js';
import type { DataDirIdentity } from './data-dir-identity.js';
import type { SandboxReports } from './sandbox-reports.js';
import type { WorkspaceBudget } from './workspace-budget.js';

export interface WorkerDeps {
  config: ResolvedConfig;
  store: WorkerStore;
  runtime: SandboxRuntime;
  clock: Clock;
  log: Logger;
  paths: HostPaths;
  /** The sandbox image of agents that name none. */
  image: string;
  /** Provider keys for the gateway's model proxy (the host's secret store). */
  secrets: SecretSource;
  /** Serves egress targets with header rules (TLS with the per-install CA, secrets filled in). */
  egress: EgressInterceptor;
  /** The blob store, checked at start: mediated storage's object contents live there. */
  blobs: BlobStore;
}

/** What starting and running a sandbox needs on top: this worker's identity and its files. */
export interface SandboxDeps extends WorkerDeps {
  installId: string;
  workerId: string;
  /** Signs the session tokens of this worker's sandboxes. */
  secret: Buffer;
  /** Staged runner code to mount read-only. */
  runnerDir: string;
  workspaces: Workspaces;
  /** Keeps the data dir's workspace copies under the byte budget; told which copies are in use. */
  cacheBudget: WorkspaceBudget;
  /** Where every sandbox's lifecycle is reported to the store. */
  sandboxReports: SandboxReports;
  /** This machine's data dir: what a resident workspace written in place is held by. */
  dataDir: DataDirIdentity;
}
