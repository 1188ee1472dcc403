/**
 * What the fault injector records of each fault it injected (the report and the checker
 * read these), and the targets it may hit: engines, workers, nodes.
 */
import type Dockerode from 'dockerode';
import type { Store } from '../store/index.js';

export interface SandboxKill {
  kind: 'sandbox-kill';
  at: number;
  /** When the kill call returned: the container is dead by then (a warm one may have started a turn since `at`). */
  killedAt: number;
  container: string;
  /** A warm sandbox, bound to no session yet (labels cannot say which session a warm one got later). */
  warm: boolean;
  workerId: string;
}

export interface WorkerKill {
  kind: 'worker-kill';
  at: number;
  pid: number;
  workerId: string;
  /** Which child ('worker-1', ...). */
  child: string;
  restartedAt: number | null;
  restartedPid: number | null;
}

export interface StoreRestart {
  kind: 'store-restart';
  /** When the stop was issued. */
  at: number;
  /** When the server accepted connections again; null if it did not come back. */
  upAt: number | null;
}

export interface Partition {
  kind: 'partition';
  /** When the link was cut. */
  at: number;
  workerId: string;
  child: string;
  /** The sandboxes running its turns at the cut. */
  sandboxes: string[];
  /** Of those, how many still ran a lease after the cut (must be 0: it fenced itself); null if not looked at. */
  sandboxesAliveAfterLease: number | null;
  /** When the link came up again; null if healing failed. */
  healedAt: number | null;
}

/** How a replicated store's primary dies. */
export type PrimaryDeath = 'postmaster' | 'member';

export interface StoreFailover {
  kind: 'store-failover';
  what: PrimaryDeath;
  /** The member that was the primary. */
  member: string;
  /** When it was killed (for a member: when its link was cut). */
  at: number;
  /** The member that led after it, and when it left recovery; null if none led within the wait. */
  newPrimary: string | null;
  promotedAt: number | null;
  /**
   * The first berth commit on the new primary, after its promotion (its commit marker's
   * time): the end of MTTR; null if none came. Commits the dying primary's backends still
   * made (and replicated) in the few ms after a postmaster kill are not the new primary's.
   */
  firstCommitAt: number | null;
  /** The first failed store call a berth process logged after `at` (its log, read after the run): the end of MTTD. */
  firstFailureAt: number | null;
}

export interface NodeKill {
  kind: 'node-kill';
  at: number;
  /** Which node ('n1', ...), and the id of the worker that died with it. */
  node: string;
  workerId: string;
  /** When all of its processes were dead. */
  deadAt: number | null;
  /** When its mounts, disk and cgroups were gone too. */
  droppedAt: number | null;
  /** When it was up again, empty: its engine answering with the image in it, its worker registered. */
  restartedAt: number | null;
}

export interface BlobsKill {
  kind: 'blobs-kill';
  /** When the S3 daemon was SIGKILLed. */
  at: number;
  /** When S3 answered again after its restart; null if it did not come back. */
  upAt: number | null;
}

export type Fault =
  | SandboxKill
  | WorkerKill
  | NodeKill
  | BlobsKill
  | StoreRestart
  | StoreFailover
  | Partition;

/** An engine whose sandboxes the injector may kill: the host's, or a node's. */
export interface SandboxEngine {
  docker: Dockerode;
  installId: string;
}

/** A node the injector may kill (chaos-node.ts). */
export interface KillableNode {
  readonly name: string;
  /** The id of its worker's current incarnation; null until known. */
  workerId(): string | null;
  /** Everything of it dies at once; resolves once all of it is dead. */
  kill(): Promise<void>;
  /** Its mounts, disk and cgroups go, as a reboot and a lost disk take them. */
  wipe(): Promise<void>;
  /** It comes back empty. */
  restart(): Promise<void>;
}

/** A worker child the injector may SIGKILL and restart (see children.ts). */
export interface KillableWorker {
  readonly name: string;
  readonly pid: number | undefined;
  /** The berth worker id of the current incarnation; null until known. */
  workerId(): string | null;
  sigkill(): Promise<void>;
  restart(): Promise<void>;
}

/** A worker child in a network namespace of its own, whose link the injector may cut. */
export interface PartitionableWorker {
  readonly name: string;
  workerId(): string | null;
  cut(): Promise<void>;
  heal(): Promise<void>;
}

/** A running turn: its sandbox's name, and when it started (epoch ms, the workers' clock). */
export interface RunningTurn {
  sessionId: string;
  sandbox: string;
  startedAt: number;
  /** Its messages' last try: if it failed they would fail with it. */
  lastTry: boolean;
}

/** The running turns, per worker id. */
export type RunningTurns = () => Promise<Map<string, RunningTurn[]>>;

/** The running turns as the store has them: each session's current turn, by its worker; `maxTries` is the workers' limit. */
export function runningTurnsIn(store: Store, maxTries: number): RunningTurns {
  return async () => {
    const turns = new Map<string, RunningTurn[]>();
    for (const s of await store.listSessionViews(store.clock.now())) {
      const turn = s.currentTurn;
      if (turn?.workerId)
        turns.set(turn.workerId, [
          ...(turns.get(turn.workerId) ?? []),
          {
            sessionId: s.id,
            sandbox: turn.sandbox ?? '',
            startedAt: turn.startedAt,
            lastTry: turn.attempt >= maxTries,
          },
        ]);
    }
    return turns;
  };
}
