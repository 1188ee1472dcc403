/**
 * Which turns each injected fault hit, and how long berth took to notice and to recover.
 * Pure. All times are epoch ms from the same host clock (the workers write turn times
 * with Date.now(); the injector records faults with Date.now()).
 *
 *   sandbox-kill  hit     = aborted turns that ran in the killed sandbox (turn rows name their
 *                           sandbox: cold or taken from the warm pool) while the kill call
 *                           was under way (a warm sandbox may start a turn during it)
 *                 detect  = hit.ended_at - kill time
 *                 recover = that session's next committed turn's ended_at - kill time
 *   worker-kill   hit     = turns of the killed worker running at the kill and aborted with
 *                           LEASE_EXPIRED (the sweep of another process)
 *                 detect, recover: as above, per hit turn and per hit session
 *   node-kill     hit     = turns of the killed node's worker running at the kill and aborted
 *                           with LEASE_EXPIRED (as a worker kill: its sandboxes died with it)
 *                 detect, recover: as above, per hit turn and per hit session
 *   blobs-kill    hit     = aborted turns that were running while the S3 daemon was down and
 *                           ended with a blob store error (an outage must cost latency only:
 *                           a run that passes has none)
 *                 detect, recover: as above, from the kill
 *   store-restart hit     = aborted turns that were running at some time while the database
 *                           was down (from the stop to the restart; to the end of the run if
 *                           it never came back); for a turn lost with its worker's lease
 *                           (WORKER_FENCED, LEASE_EXPIRED), to a lease after the restart
 *                 detect, recover: as above, from the stop
 *   store-failover hit    = aborted turns that were running at some time while the store had
 *                           no primary berth could commit on (from the kill to berth's first
 *                           commit on the new primary; to the end of the run if none came;
 *                           a lease longer for a turn lost with its worker's lease)
 *                 detect, recover: as above, from the kill (the failover's own MTTD and
 *                           MTTR, store calls rather than turns, are in the report's
 *                           store failover table)
 *   partition     hit     = aborted turns of the cut-off worker running at the cut
 *                 detect, recover: as above, from the cut
 *                 late commits accepted = its turns committed with a time from a lease after
 *                           the cut until the heal: writes the fence had to refuse (must be 0)
 *
 * A fault "bit" when it found a running turn: a sandbox kill, a worker kill or a partition
 * ends the turn it meets, so one of its hits; a store restart or failover may only delay a
 * turn, so any turn that ran while the store was away (to the restart, or to berth's first
 * commit on the new primary; to the end of the run if that never came).
 *
 * Invariants: a fault with no hit is "missed" and adds no timing sample; a hit session that
 * never commits again is "unrecovered"; percentiles are nearest-rank over the samples.
 */
import type { Turn } from '../core/index.js';
import type {
  BlobsKill,
  Fault,
  NodeKill,
  Partition,
  SandboxKill,
  StoreFailover,
  StoreRestart,
  WorkerKill,
} from './fault-records.js';

export const FAULT_KINDS = [
  'sandbox-kill',
  'worker-kill',
  'node-kill',
  'blobs-kill',
  'store-restart',
  'store-failover',
  'partition',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface Stats {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

export interface FaultTiming {
  injected: number;
  /** Faults that ended at least one running turn. */
  hit: number;
  missed: number;
  /** Hit sessions that never committed again (their message failed, or the run ended). */
  unrecovered: number;
  detectMs: Stats | null;
  recoverMs: Stats | null;
}

/** The turn was running at some moment of [from, to]. */
export function ranAt(t: Turn, from: number, to = from): boolean {
  return ranDuring(t, from, to);
}

export function sandboxKillHits(f: SandboxKill, turns: Turn[]): Turn[] {
  return turns.filter(
    (t) => t.status === 'aborted' && t.sandbox === f.container && ranAt(t, f.at, f.killedAt),
  );
}

/** A worker kill, or a node kill (its worker died with it). */
export function workerKillHits(f: WorkerKill | NodeKill, turns: Turn[]): Turn[] {
  return turns.filter(
    (t) =>
      t.status === 'aborted' &&
      t.workerId === f.workerId &&
      t.errorCode === 'LEASE_EXPIRED' &&
      ranAt(t, f.at),
  );
}

const BLOB_ERRORS: ReadonlySet<string> = new Set(['BLOB_WRITE_FAILED', 'BLOB_READ_FAILED']);

export function blobsKillHits(f: BlobsKill, turns: Turn[]): Turn[] {
  return turns.filter(
    (t) =>
      t.status === 'aborted' &&
      BLOB_ERRORS.has(t.errorCode ?? '') &&
      ranDuring(t, f.at, f.upAt ?? Number.POSITIVE_INFINITY),
  );
}

export function storeRestartHits(f: StoreRestart, turns: Turn[], leaseMs: number): Turn[] {
  return turns.filter(
    (t) => t.status === 'aborted' && ranDuring(t, f.at, storeOutageEnd(f.upAt, t, leaseMs)),
  );
}

/** The outage lasts until berth committed on the new primary; with no such commit, to the end of the run. */
export function storeFailoverHits(f: StoreFailover, turns: Turn[], leaseMs: number): Turn[] {
  return turns.filter(
    (t) => t.status === 'aborted' && ranDuring(t, f.at, storeOutageEnd(f.firstCommitAt, t, leaseMs)),
  );
}

/** A turn its worker lost with its lease: fenced by the worker itself, or swept by another. */
const LEASE_ABORTS: ReadonlySet<string> = new Set(['WORKER_FENCED', 'LEASE_EXPIRED']);

/**
 * Until when a store outage that ended at `end` (null: never) explains an aborted turn. For
 * a turn lost with its worker's lease, a lease longer: a worker reckons its lease from its
 * last renewal, which may come (or not, and it fences itself) up to a lease after the store
 * is back; a turn it started meanwhile dies with the fence.
 */
function storeOutageEnd(end: number | null, t: Turn, leaseMs: number): number {
  if (end === null) return Number.POSITIVE_INFINITY;
  return LEASE_ABORTS.has(t.errorCode ?? '') ? end + leaseMs : end;
}

export function partitionHits(f: Partition, turns: Turn[]): Turn[] {
  return turns.filter((t) => t.status === 'aborted' && t.workerId === f.workerId && ranAt(t, f.at));
}

/** Turns the cut-off worker committed while it had no lease: a lease after the cut until the heal. */
export function lateCommits(f: Partition, leaseMs: number, turns: Turn[]): Turn[] {
  const until = f.healedAt ?? Number.POSITIVE_INFINITY;
  return turns.filter(
    (t) =>
      t.status === 'committed' &&
      t.workerId === f.workerId &&
      t.endedAt !== null &&
      t.endedAt > f.at + leaseMs &&
      t.endedAt <= until,
  );
}

function ranDuring(t: Turn, from: number, to: number): boolean {
  return t.startedAt <= to && (t.endedAt ?? Number.POSITIVE_INFINITY) >= from;
}

/** True when some injected fault was in effect on this aborted turn's sandbox or worker while it ran. */
export function explainedByFault(t: Turn, faults: Fault[], leaseMs: number): boolean {
  return faults.some((f) => inEffectOn(f, t, leaseMs));
}

function inEffectOn(f: Fault, t: Turn, leaseMs: number): boolean {
  switch (f.kind) {
    case 'sandbox-kill':
      return f.container === t.sandbox && ranAt(t, f.at, f.killedAt);
    case 'worker-kill':
    case 'node-kill':
      return f.workerId === t.workerId && ranAt(t, f.at);
    case 'blobs-kill':
      return BLOB_ERRORS.has(t.errorCode ?? '') && ranDuring(t, f.at, f.upAt ?? Number.POSITIVE_INFINITY);
    case 'store-restart':
      return ranDuring(t, f.at, storeOutageEnd(f.upAt, t, leaseMs));
    case 'store-failover':
      return ranDuring(t, f.at, storeOutageEnd(f.firstCommitAt, t, leaseMs));
    case 'partition':
      return f.workerId === t.workerId && ranDuring(t, f.at, f.healedAt ?? Number.POSITIVE_INFINITY);
  }
}

export function timingOf(kills: { at: number; hits: Turn[] }[], turns: Turn[]): FaultTiming {
  const detect: number[] = [];
  const recover: number[] = [];
  let unrecovered = 0;
  for (const { at, hits } of kills) {
    for (const t of hits) if (t.endedAt !== null) detect.push(t.endedAt - at);
    for (const session of new Set(hits.map((t) => t.sessionId))) {
      const next = turns
        .filter(
          (t) => t.sessionId === session && t.status === 'committed' && t.endedAt !== null && t.endedAt > at,
        )
        .sort((a, b) => a.endedAt! - b.endedAt!)[0];
      if (next) recover.push(next.endedAt! - at);
      else unrecovered++;
    }
  }
  const hit = kills.filter((k) => k.hits.length > 0).length;
  return {
    injected: kills.length,
    hit,
    missed: kills.length - hit,
    unrecovered,
    detectMs: stats(detect),
    recoverMs: stats(recover),
  };
}

/** Nearest-rank percentiles; null for no samples. */
export function stats(samples: number[]): Stats | null {
  if (samples.length === 0) return null;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  return { n: sorted.length, p50: rank(50), p99: rank(99), max: sorted.at(-1)! };
}

/** Per kind, how many injected faults found a running turn (the header says what that is). */
export function faultsThatBit(faults: Fault[], turns: Turn[]): Record<FaultKind, number> {
  const bit = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  for (const f of faults) if (foundRunningTurn(f, turns)) bit[f.kind]++;
  return bit;
}

function foundRunningTurn(f: Fault, turns: Turn[]): boolean {
  switch (f.kind) {
    case 'sandbox-kill':
      return sandboxKillHits(f, turns).length > 0;
    case 'worker-kill':
    case 'node-kill':
      return workerKillHits(f, turns).length > 0;
    case 'blobs-kill':
      return turns.some((t) => ranDuring(t, f.at, f.upAt ?? Number.POSITIVE_INFINITY));
    case 'partition':
      return partitionHits(f, turns).length > 0;
    case 'store-restart':
      return turns.some((t) => ranDuring(t, f.at, f.upAt ?? Number.POSITIVE_INFINITY));
    case 'store-failover':
      return turns.some((t) => ranDuring(t, f.at, f.firstCommitAt ?? Number.POSITIVE_INFINITY));
  }
}
