/**
 * The chaos report as data: what was injected, what the clients saw, how fast berth
 * noticed and recovered, and the invariants. `buildReport` is pure (inputs in, object
 * out); render-report.ts turns the object into text for people.
 *
 * Fault attribution and timing live in fault-timing.ts, the pass/fail verdict in
 * verdict.ts. Besides them the report lists the aborted turns no injected fault explains:
 * under chaos those are berth's own failures, and the verdict fails on any. A request
 * that did not end ok says whether an earlier one of its session excuses it (excuses.ts).
 * With long turns, the model calls each fault made the long sessions redo (redone-calls.ts).
 */
import type { Turn } from '../core/index.js';
import { RETRY_BUDGET_MS } from '../store/index.js';
import { excusedMessages } from './excuses.js';
import type {
  BlobsKill,
  Fault,
  NodeKill,
  Partition,
  PrimaryDeath,
  SandboxKill,
  StoreFailover,
  StoreRestart,
  WorkerKill,
} from './fault-records.js';
import {
  blobsKillHits,
  explainedByFault,
  FAULT_KINDS,
  type FaultKind,
  type FaultTiming,
  faultsThatBit,
  lateCommits,
  partitionHits,
  type Stats,
  sandboxKillHits,
  stats,
  storeFailoverHits,
  storeRestartHits,
  timingOf,
  workerKillHits,
} from './fault-timing.js';
import type { InvariantResult } from './invariant-result.js';
import { acknowledgedMissing, countReplies } from './invariants.js';
import type { LoadReport } from './load-sampler.js';
import {
  type BlobsSection,
  blobsSection,
  type NodesInput,
  type NodesSection,
  nodesSection,
} from './node-report.js';
import { type RedoneCalls, redoneByFault } from './redone-calls.js';
import type { ModelCall } from './scripted-model.js';
import type { SelfFence } from './self-fences.js';
import type { Outcome, RequestRecord } from './session-driver.js';
import type { SessionSnapshot } from './snapshot.js';
import { type AbortNoFaultExplains, decideVerdict } from './verdict.js';

export interface ChaosSettings {
  sessions: number;
  turns: number;
  /** Sessions of one long model turn each (workload.ts, longTurnPlan); 0 = none. */
  longTurns: number;
  slotsPerWorker: number;
  workers: number;
  killEveryMs: { min: number; max: number };
  /** Workers SIGKILLed at once, about a third into the run; 0 = none. */
  killWorkers: number;
  /** Nodes (each its engine, disk and worker); null = workers on the host. */
  nodes: number | null;
  /** Nodes killed at once, about a third into the run; 0 = none. */
  killNodes: number;
  /** How long the S3 daemon was held down; null = never killed. */
  blobsDownMs: number | null;
  /** 'sqlite', or the PostgreSQL URL without its password. */
  store: string;
  /** How long the database was held down by the store restart, ms; null = no restart. */
  storeDownMs: number | null;
  /** How long the partitioned worker's link was cut, ms; null = no partition. */
  partitionMs: number | null;
  /** How the replicated store's primary was killed, once per entry, spread over the run; [] = never. */
  storeFailovers: PrimaryDeath[];
  leaseMs: number;
  durationCapMs: number;
  seed: number;
  dataDir: string;
  /** False when the run deleted its temp data dir. */
  dataDirKept: boolean;
}

export interface ChaosReport {
  settings: ChaosSettings;
  wallMs: number;
  /** The duration cap ended the workload before every turn was sent and answered. */
  cutShort: boolean;
  requests: Record<Outcome, number> & { planned: number; sent: number; notSent: number; retriesSeen: number };
  userVisibleErrors: number;
  /** Messages berth acknowledged (202) or replies clients received that the store does not hold. */
  acknowledgedLost: number;
  /** Inbound messages with more than one committed reply. */
  duplicateReplies: number;
  /** POST to reply, of ok requests: what a user waits, retries and backoff included. */
  latencyMs: Stats | null;
  messages: { inbound: number; outbound: number };
  faults: {
    'sandbox-kill': number;
    'worker-kill': number;
    'node-kill': number;
    'blobs-kill': number;
    'store-restart': number;
    'store-failover': number;
    partition: number;
    skipped: number;
  };
  /** Aborted turns: each one's messages were dispatched again (or failed). */
  redispatches: number;
  /** Aborted turns by error (ids, paths and sandbox names blanked out), most frequent first. */
  abortReasons: Record<string, number>;
  /** Aborted turns that no injected fault explains (not in a killed sandbox, not on the killed worker): berth's own failures. */
  unexplainedAborts: { count: number; reasons: Record<string, number>; turns: AbortNoFaultExplains[] };
  /** Per fault kind, the injected faults that found a running turn (verdict.ts says how). */
  faultsBit: Record<FaultKind, number>;
  timing: Record<FaultKind, FaultTiming>;
  /** Each failover of the replicated store, as berth lived it (store-failover.ts). */
  storeFailovers: {
    what: PrimaryDeath;
    member: string;
    newPrimary: string | null;
    /** Killed → the first failed store call a berth process logged. */
    mttdMs: number | null;
    /** Killed → berth's first commit on the new primary. */
    mttrMs: number | null;
    /** Killed → the new primary seen leading (Patroni). */
    promotedMs: number | null;
  }[];
  /** The partitioned worker's fencing: null without a partition. */
  partition: {
    worker: string;
    /** Sandboxes that ran its turns at the cut and still ran a lease later (0: it fenced itself). */
    sandboxesAliveAfterLease: number | null;
    sandboxesAtCut: number;
    /** Its commits the fence had to refuse and did not (0). */
    lateCommitsAccepted: number;
    healed: boolean;
  } | null;
  /** A run on nodes: the killed nodes and a node's engine cost; null otherwise. */
  nodes: NodesSection | null;
  /** A run that killed the S3 daemon: the turns that lived through it; null otherwise. */
  blobs: BlobsSection | null;
  /** A run with long turns: the model calls they made upstream, and those each fault made them redo; null otherwise. */
  longTurns: (RedoneCalls & { calls: number }) | null;
  invariants: InvariantResult[];
  /** Memory and store load while the workload ran. */
  load: LoadReport;
  passed: boolean;
  /** Why the run did not pass, one line each (verdict.ts); empty when it passed. */
  failures: string[];
  faultLog: Fault[];
  /** Requests that did not end ok, with why, and whether an earlier one of their session excuses them. */
  notOk: (RequestRecord & { excused: string | null })[];
}

export interface ReportInput {
  settings: ChaosSettings;
  wallMs: number;
  cutShort: boolean;
  requests: RequestRecord[];
  notSent: number;
  faults: Fault[];
  skippedFaults: number;
  /** The workers' self-fences, from their logs: what a store outage may excuse rests on them. */
  selfFences: SelfFence[];
  load: LoadReport;
  sessions: SessionSnapshot[];
  invariants: InvariantResult[];
  nodes: NodesInput | null;
  /** The long sessions, and every call the scripted model took; null without long turns. */
  longTurns: { sessionIds: string[]; calls: ModelCall[] } | null;
}

export function buildReport(input: ReportInput): ChaosReport {
  const evidence = {
    leaseMs: input.settings.leaseMs,
    selfFences: input.selfFences,
    storeRetryBudgetMs: RETRY_BUDGET_MS,
  };
  const { requests, sessions, faults } = input;
  const count = (o: Outcome) => requests.filter((r) => r.outcome === o).length;
  const turns = sessions.flatMap((s) => s.turns);
  const aborted = turns.filter((t) => t.status === 'aborted');
  const sandboxKills = faults.filter((f): f is SandboxKill => f.kind === 'sandbox-kill');
  const workerKills = faults.filter((f): f is WorkerKill => f.kind === 'worker-kill');
  const nodeKills = faults.filter((f): f is NodeKill => f.kind === 'node-kill');
  const blobsKills = faults.filter((f): f is BlobsKill => f.kind === 'blobs-kill');
  const storeRestarts = faults.filter((f): f is StoreRestart => f.kind === 'store-restart');
  const failovers = faults.filter((f): f is StoreFailover => f.kind === 'store-failover');
  const since = (f: StoreFailover, t: number | null) => (t === null ? null : t - f.at);
  const partitions = faults.filter((f): f is Partition => f.kind === 'partition');
  const cut = partitions[0];
  const lateAccepted = partitions.flatMap((f) => lateCommits(f, input.settings.leaseMs, turns)).length;
  /** A kind's timing: each of its faults with the turns it hit. */
  const timed = <F extends Fault>(kindFaults: F[], hits: (f: F) => Turn[]) =>
    timingOf(
      kindFaults.map((f) => ({ at: f.at, hits: hits(f) })),
      turns,
    );
  const reason = (t: Turn) => normalizeError(t.error ?? '', input.settings.dataDir);
  const unexplained = aborted.filter((t) => !explainedByFault(t, faults, evidence));
  const unexplainedTurns = unexplained.map((t) => ({
    sessionId: t.sessionId,
    turnId: t.id,
    workerId: t.workerId,
    code: t.errorCode,
    reason: reason(t),
  }));
  const fail = count('fail');
  const unknown = count('unknown');
  const faultsBit = faultsThatBit(faults, turns, evidence);
  const long = input.longTurns;
  const redone =
    long &&
    redoneByFault(
      long.calls,
      turns.filter((t) => long.sessionIds.includes(t.sessionId)),
      faults,
      evidence,
    );
  const verdict = decideVerdict({
    invariants: input.invariants,
    requests: { fail, unknown, notSent: input.notSent },
    cutShort: input.cutShort,
    asked: input.settings,
    injected: Object.fromEntries(
      FAULT_KINDS.map((k) => [k, faults.filter((f) => f.kind === k).length]),
    ) as Record<FaultKind, number>,
    bit: faultsBit,
    unexplainedAborts: unexplainedTurns,
    partition: cut
      ? {
          sandboxesAliveAfterLease: cut.sandboxesAliveAfterLease,
          healed: cut.healedAt !== null,
          lateCommitsAccepted: lateAccepted,
        }
      : null,
    failovers: {
      asked: input.settings.storeFailovers.length,
      injected: failovers.length,
      recovered: failovers.filter((f) => f.newPrimary !== null && f.firstCommitAt !== null).length,
    },
    notBack: {
      nodes: nodeKills.filter((f) => f.restartedAt === null).length,
      blobs: blobsKills.some((f) => f.upAt === null),
    },
    longTurns: redone,
  });
  return {
    settings: input.settings,
    wallMs: input.wallMs,
    cutShort: input.cutShort,
    requests: {
      planned: input.settings.sessions * input.settings.turns + input.settings.longTurns,
      sent: requests.length,
      notSent: input.notSent,
      ok: count('ok'),
      fail,
      unknown,
      retriesSeen: requests.reduce((n, r) => n + r.retriesSeen, 0),
    },
    userVisibleErrors: fail + unknown,
    acknowledgedLost: acknowledgedMissing(sessions, requests).length,
    duplicateReplies: countReplies(sessions).duplicated.length,
    latencyMs: stats(requests.filter((r) => r.outcome === 'ok').map((r) => r.endedAt - r.sentAt)),
    messages: {
      inbound: sessions.reduce((n, s) => n + s.messages.filter((m) => m.direction === 'in').length, 0),
      outbound: sessions.reduce((n, s) => n + s.messages.filter((m) => m.direction === 'out').length, 0),
    },
    faults: {
      'sandbox-kill': sandboxKills.length,
      'worker-kill': workerKills.length,
      'node-kill': nodeKills.length,
      'blobs-kill': blobsKills.length,
      'store-restart': storeRestarts.length,
      'store-failover': failovers.length,
      partition: partitions.length,
      skipped: input.skippedFaults,
    },
    redispatches: aborted.length,
    abortReasons: tally(aborted.map(reason)),
    unexplainedAborts: {
      count: unexplained.length,
      reasons: tally(unexplainedTurns.map((a) => a.reason)),
      turns: unexplainedTurns,
    },
    faultsBit,
    timing: {
      'sandbox-kill': timed(sandboxKills, (f) => sandboxKillHits(f, turns)),
      'worker-kill': timed(workerKills, (f) => workerKillHits(f, turns)),
      'node-kill': timed(nodeKills, (f) => workerKillHits(f, turns)),
      'blobs-kill': timed(blobsKills, (f) => blobsKillHits(f, turns)),
      'store-restart': timed(storeRestarts, (f) => storeRestartHits(f, turns, evidence)),
      'store-failover': timed(failovers, (f) => storeFailoverHits(f, turns, evidence)),
      partition: timed(partitions, (f) => partitionHits(f, turns)),
    },
    storeFailovers: failovers.map((f) => ({
      what: f.what,
      member: f.member,
      newPrimary: f.newPrimary,
      mttdMs: since(f, f.firstFailureAt),
      mttrMs: since(f, f.firstCommitAt),
      promotedMs: since(f, f.promotedAt),
    })),
    partition: cut
      ? {
          worker: `${cut.child} (${cut.workerId})`,
          sandboxesAtCut: cut.sandboxes.length,
          sandboxesAliveAfterLease: cut.sandboxesAliveAfterLease,
          lateCommitsAccepted: lateAccepted,
          healed: cut.healedAt !== null,
        }
      : null,
    nodes: input.nodes && nodesSection(input.nodes, faults),
    blobs: blobsSection(faults, turns),
    longTurns: redone && { ...redone, calls: long!.calls.length },
    invariants: input.invariants,
    load: input.load,
    passed: verdict.passed,
    failures: verdict.failures,
    faultLog: faults,
    notOk: notOkRequests(requests),
  };
}

/** The requests that did not end ok, each with what excuses it (null: nothing does). */
function notOkRequests(requests: RequestRecord[]): ChaosReport['notOk'] {
  const excused = excusedMessages(requests);
  return requests
    .filter((r) => r.outcome !== 'ok')
    .map((r) => ({ ...r, excused: r.messageId === null ? null : (excused.get(r.messageId) ?? null) }));
}

/** An error as a category: one line, with data dir, sandbox names, turn ids, mount options and durations blanked. */
export function normalizeError(error: string, dataDir: string): string {
  const text = error
    .split(dataDir)
    .join('<data>')
    .replace(/berth-[0-9a-f]{10}-[A-Za-z0-9_.-]+?-g\d+/g, '<sandbox>')
    .replace(/turn_[0-9a-z]+/g, '<turn>')
    .replace(/-o \S+/g, '-o ...')
    .replace(/\d+ ms/g, 'N ms')
    .replace(/\s*\n\s*/g, ' | ')
    .trim();
  return text.length > 160 ? `${text.slice(0, 157)}...` : text;
}

/** Counts per distinct value, most frequent first. */
function tally(values: string[]): Record<string, number> {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return Object.fromEntries([...counts].sort((a, b) => b[1] - a[1]));
}
