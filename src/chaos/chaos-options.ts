/**
 * What a chaos run is asked for (the workload, the faults, the store, blobs and nodes it
 * runs on) and the progress it reports while it runs.
 */

import type { PrimaryDeath } from './fault-records.js';
import type { PatroniCluster } from './patroni-cluster.js';
import type { S3Service } from './s3-service.js';

export interface ChaosOptions {
  sessions: number;
  turns: number;
  /**
   * More sessions, of one long model turn each (long-turns.ts): berth's `anthropic` loop
   * against a scripted model of the run's, LONG_TURN_STEPS tool calls a turn. Not on nodes
   * nor with a partition (the model is reached on this host's loopback). @default 0
   */
  longTurns?: number;
  /** The workload stops (unfinished requests become unknown) after this, ms. */
  durationCapMs: number;
  killEveryMs: { min: number; max: number };
  /** Workers SIGKILLed at once about a third into the run (and restarted 1 s later); 0 = none. */
  killWorkers: number;
  /** Worker processes. @default 2 */
  workers?: number;
  /** The store of every process: default SQLite in the data dir. */
  store?: {
    /** postgres:// URL. */
    url: string;
    /** Restart the database server once, halfway through the run: stop, `downMs` down, start. */
    restart?: { stop(): Promise<void>; start(): Promise<void>; downMs: number };
    /**
     * The store is this replicated cluster (`url` is its multi-host URL of `database`): its
     * primary dies once per entry of `deaths`, the k-th of n when k/(n+1) of the turns are done.
     */
    failover?: { cluster: PatroniCluster; database: string; deaths: PrimaryDeath[] };
  };
  /**
   * Cut one worker's network link for `durationMs` (default two leases) about a quarter
   * into the run, then heal it. Needs a PostgreSQL store, root and iproute2.
   */
  partitionWorker?: { durationMs?: number };
  /**
   * Every process keeps its blobs (the workspace chains among them) in a bucket of this S3
   * service; default: file blobs in the data dir. `killForMs`: its daemon is SIGKILLed
   * halfway through the run, held down that long, and started again.
   */
  blobs?: { service: S3Service; bucket: string; killForMs?: number };
  /**
   * The workers run on `count` nodes (node-set.ts), one each; `kill` of them die at once
   * about a third into the run and come back empty. Needs a PostgreSQL store, `blobs`,
   * root, iproute2 and a cgroup v1 freezer. `workers` is then `count`.
   */
  nodes?: { count: number; kill: number };
  slotsPerWorker: number;
  /** BERTH_LEASE of the children, e.g. '3s'. */
  lease: string;
  /** Use this data dir (kept); default a fresh temp dir. */
  dataDir?: string;
  /** Keep the temp data dir (store, logs, workspaces) for inspection. */
  keep?: boolean;
  seed?: number;
  messageTimeoutMs?: number;
  /** BERTH_LOG_LEVEL of the children (their stderr goes to <data>/api.log, worker-N.log). @default warn */
  logLevel?: string;
  /** Environment of the children (BERTH_* settings pass through); the run sets DATA, PORT, LEASE, LOG_LEVEL. */
  env?: NodeJS.ProcessEnv;
  onProgress?: (p: ChaosProgress) => void;
  /** Aborting it ends the workload early (like the duration cap); shutdown, check and cleanup still run. */
  signal?: AbortSignal;
}

export interface ChaosProgress {
  phase: 'starting' | 'running' | 'stopping' | 'checking' | 'done';
  turnsDone: number;
  turnsTotal: number;
  ok: number;
  fail: number;
  unknown: number;
  sandboxKills: number;
  workerKills: number;
  storeRestarts: number;
  storeFailovers: number;
  partitions: number;
  nodeKills: number;
  blobsKills: number;
  elapsedMs: number;
}
