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
 *   store-restart, store-failover
 *                 hit     = aborted turns the outage can have caused. Its window: a restart
 *                           from the stop to the server's return; a failover from the kill to
 *                           the new primary's promotion plus the store's retry budget (never
 *                           berth's own first commit there: a slower recovery must not widen
 *                           its own excuse); to the end of the run if neither came. A turn
 *                           lost with its worker's lease (WORKER_FENCED, LEASE_EXPIRED) only
 *                           if that worker fenced itself because of the outage: its last
 *                           renewal the store took plus OWN_LEASE_FENCE_AT of a lease falls in
 *                           the window (its self-fence log line), and the turn ran at that
 *                           fence; any other turn only with the store's own error code
 *                           (STORE_UNAVAILABLE) and running in the window
 *                 detect, recover: as above, from the stop or kill (the failover's own MTTD
 *                           and MTTR, store calls rather than turns, are in the report's
 *                           store failover table)
 *   partition     hit     = aborted turns of the cut-off worker running at the cut
 *                 detect, recover: as above, from the cut
 *                 late commits accepted = its turns committed with a time from a lease after
 *                           the cut until the heal: writes the fence had to refuse (must be 0)
 *
 * A fault "bit" when it found a running turn: a sandbox kill, a worker kill or a partition
 * ends the turn it meets, so one of its hits; a store restart or failover may only delay a
 * turn, so any turn that ran in its window.
 *
 * Invariants: a fault with no hit is "missed" and adds no timing sample; a hit session that
 * never commits again is "unrecovered"; percentiles are nearest-rank over the samples.
 */
import { OWN_LEASE_FENCE_AT, type Turn } from '../core/index.js';
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
import type { SelfFence } from './self-fences.js';

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

/** What says whether a store outage caused an abort: the lease, the workers' self-fences, the store's retry budget. */
export interface OutageEvidence {
  leaseMs: number;
  selfFences: SelfFence[];
  /** How long the store retries a call before it fails it (STORE_UNAVAILABLE). */
  storeRetryBudgetMs: number;
}

export function storeRestartHits(f: StoreRestart, turns: Turn[], e: OutageEvidence): Turn[] {
  return turns.filter((t) => t.status === 'aborted' && outageExplains(t, outageWindow(f, e), e));
}

export function storeFailoverHits(f: StoreFailover, turns: Turn[], e: OutageEvidence): Turn[] {
  return turns.filter((t) => t.status === 'aborted' && outageExplains(t, outageWindow(f, e), e));
}

/** A turn its worker lost with its lease: fenced by the worker itself, or swept by another. */
const LEASE_ABORTS: ReadonlySet<string> = new Set(['WORKER_FENCED', 'LEASE_EXPIRED']);
/** The abort codes a store that does not answer gives a turn itself. */
const STORE_ABORTS: ReadonlySet<string> = new Set(['STORE_UNAVAILABLE']);

/** When a store outage was in effect: to the server's return (a restart) or the promotion plus the retry budget (a failover); never back, to the end. */
function outageWindow(f: StoreRestart | StoreFailover, e: OutageEvidence): { from: number; to: number } {
  const end =
    f.kind === 'store-restart' ? f.upAt : f.promotedAt === null ? null : f.promotedAt + e.storeRetryBudgetMs;
  return { from: f.at, to: end ?? Number.POSITIVE_INFINITY };
}

/** Whether an outage in that window can have aborted the turn (the header says when). */
function outageExplains(t: Turn, w: { from: number; to: number }, e: OutageEvidence): boolean {
  const code = t.errorCode ?? '';
  if (LEASE_ABORTS.has(code))
    return e.selfFences.some((fence) => {
      const fencedAt = fence.renewedAt + OWN_LEASE_FENCE_AT * e.leaseMs;
      return fence.workerId === t.workerId && fencedAt >= w.from && fencedAt <= w.to && ranAt(t, fence.at);
    });
  return STORE_ABORTS.has(code) && ranDuring(t, w.from, w.to);
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

/** True when some injected fault was in effect on this aborted turn's sandbox or worker while it ran, and can have caused its abort. */
export function explainedByFault(t: Turn, faults: Fault[], e: OutageEvidence): boolean {
  return faultsInEffectOn(t, faults, e).length > 0;
}

/** The injected faults that were in effect on this aborted turn while it ran, in injection order. */
export function faultsInEffectOn(t: Turn, faults: Fault[], e: OutageEvidence): Fault[] {
  return faults.filter((f) => inEffectOn(f, t, e));
}

function inEffectOn(f: Fault, t: Turn, e: OutageEvidence): boolean {
  switch (f.kind) {
    case 'sandbox-kill':
      return f.container === t.sandbox && ranAt(t, f.at, f.killedAt);
    case 'worker-kill':
    case 'node-kill':
      return f.workerId === t.workerId && ranAt(t, f.at);
    case 'blobs-kill':
      return BLOB_ERRORS.has(t.errorCode ?? '') && ranDuring(t, f.at, f.upAt ?? Number.POSITIVE_INFINITY);
    case 'store-restart':
    case 'store-failover':
      return outageExplains(t, outageWindow(f, e), e);
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
export function faultsThatBit(faults: Fault[], turns: Turn[], e: OutageEvidence): Record<FaultKind, number> {
  const bit = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  for (const f of faults) if (foundRunningTurn(f, turns, e)) bit[f.kind]++;
  return bit;
}

function foundRunningTurn(f: Fault, turns: Turn[], e: OutageEvidence): boolean {
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
    case 'store-failover': {
      const w = outageWindow(f, e);
      return turns.some((t) => ranDuring(t, w.from, w.to));
    }
  }
}
