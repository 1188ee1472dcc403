/**
 * The verdict of a chaos run, decided from what the report measured. Pure.
 *
 * A run passes only when all of these hold, and the verdict names each one that does not:
 *   - the checker reported exactly the invariants it promises (CHAOS_INVARIANTS: one
 *     missing would pass unchecked, one unknown is a check nobody reads), and each held;
 *   - the run ran to its end: not cut short, and every planned message was sent (a session
 *     that never sent its messages checked nothing of them);
 *   - every request ended ok (none failed, none unknown);
 *   - every fault kind the run asked for found a running turn at least once: a fault that
 *     never met work proves nothing, and the invariants then hold trivially (a store restart
 *     or failover, an S3 daemon kill: a turn that ran through the outage);
 *   - no aborted turn is left that no injected fault explains: each such abort is berth's own
 *     failure (a false self-fence, a crash), a retry its user paid for;
 *   - a partitioned worker fenced itself within a lease, its link healed, and none of its
 *     commits from after the cut was accepted;
 *   - each store failover asked for happened and berth committed on the new primary;
 *   - every killed node and a killed S3 daemon came back;
 *   - with long turns: at least one fault hit one, no fault cost more than one model call
 *     redone upstream (redone-calls.ts: the one whose answer came but was not journalled),
 *     and no call was redone in a session before any fault hit it. That each long turn's
 *     tool calls wrote their lines exactly once is the committed-workspace invariant's.
 *
 * Which faults found a running turn is fault-timing.ts's `faultsThatBit`.
 */

import type { PrimaryDeath } from './fault-records.js';
import { FAULT_KINDS, type FaultKind } from './fault-timing.js';
import { CHAOS_INVARIANTS, type InvariantResult } from './invariant-result.js';
import type { RedoneCalls } from './redone-calls.js';

/** What the run asked the injector for (the report's settings); sandbox kills are always on. */
export interface FaultsAsked {
  killWorkers: number;
  killNodes: number;
  blobsDownMs: number | null;
  storeDownMs: number | null;
  storeFailovers: PrimaryDeath[];
  partitionMs: number | null;
}

export interface AbortNoFaultExplains {
  sessionId: string;
  turnId: string;
  workerId: string;
  code: string | null;
  reason: string;
}

export interface VerdictInput {
  invariants: InvariantResult[];
  requests: { fail: number; unknown: number; notSent: number };
  /** --duration reached, or the run interrupted, before the workload ended. */
  cutShort: boolean;
  asked: FaultsAsked;
  /** Per kind: injected faults, and those that found a running turn (fault-timing.ts, faultsThatBit). */
  injected: Record<FaultKind, number>;
  bit: Record<FaultKind, number>;
  unexplainedAborts: AbortNoFaultExplains[];
  partition: { sandboxesAliveAfterLease: number | null; healed: boolean; lateCommitsAccepted: number } | null;
  failovers: { asked: number; injected: number; recovered: number };
  /** Killed nodes that never came back, and whether a killed S3 daemon did not. */
  notBack: { nodes: number; blobs: boolean };
  /** The long sessions' redone model calls (redone-calls.ts); null without long turns. */
  longTurns: RedoneCalls | null;
}

export interface Verdict {
  passed: boolean;
  /** One line per broken condition; empty when the run passed. */
  failures: string[];
}

/** The fault kinds these settings asked for. */
export function faultKindsAsked(asked: FaultsAsked): FaultKind[] {
  const on: Record<FaultKind, boolean> = {
    'sandbox-kill': true,
    'worker-kill': asked.killWorkers > 0,
    'node-kill': asked.killNodes > 0,
    'blobs-kill': asked.blobsDownMs !== null,
    'store-restart': asked.storeDownMs !== null,
    'store-failover': asked.storeFailovers.length > 0,
    partition: asked.partitionMs !== null,
  };
  return FAULT_KINDS.filter((kind) => on[kind]);
}

const MAX_LISTED = 10;

export function decideVerdict(v: VerdictInput): Verdict {
  const failures: string[] = [];
  const reported = v.invariants.map((i) => i.name);
  const missing = CHAOS_INVARIANTS.filter((name) => !reported.includes(name));
  const extra = reported.filter((name) => !(CHAOS_INVARIANTS as readonly string[]).includes(name));
  if (missing.length > 0) failures.push(`the checker did not report the invariants ${missing.join(', ')}`);
  if (extra.length > 0)
    failures.push(`the checker reported invariants it does not promise: ${extra.join(', ')}`);
  for (const i of v.invariants.filter((x) => !x.passed))
    failures.push(`invariant ${i.name} failed: ${i.summary}`);
  if (v.cutShort)
    failures.push('the run was cut short (--duration reached, or interrupted) before its workload ended');
  if (v.requests.notSent > 0) failures.push(`${v.requests.notSent} planned messages were never sent`);
  if (v.requests.fail > 0) failures.push(`${v.requests.fail} requests failed`);
  if (v.requests.unknown > 0) failures.push(`${v.requests.unknown} requests ended unknown`);
  for (const kind of faultKindsAsked(v.asked)) {
    if (v.bit[kind] === 0)
      failures.push(
        `${kind}: asked for, ${v.injected[kind]} injected, none found a running turn (it proved nothing)`,
      );
  }
  if (v.unexplainedAborts.length > 0) {
    const listed = v.unexplainedAborts
      .slice(0, MAX_LISTED)
      .map((a) => `${a.sessionId} ${a.turnId} on ${a.workerId} (${a.code ?? 'no code'}: ${a.reason})`);
    const more = v.unexplainedAborts.length - listed.length;
    failures.push(
      `${v.unexplainedAborts.length} aborted turns no injected fault explains: ${listed.join('; ')}${more > 0 ? `; ${more} more` : ''}`,
    );
  }
  const p = v.partition;
  if (p && p.sandboxesAliveAfterLease !== 0)
    failures.push(
      `partition: ${p.sandboxesAliveAfterLease ?? 'unknown'} sandboxes of the cut-off worker still ran a lease after the cut (it must fence itself)`,
    );
  if (p && !p.healed) failures.push('partition: the link did not come up again');
  if (p && p.lateCommitsAccepted > 0)
    failures.push(
      `partition: ${p.lateCommitsAccepted} commits of the cut-off worker's lease-less time were accepted`,
    );
  const f = v.failovers;
  if (f.injected !== f.asked) failures.push(`store-failover: ${f.asked} asked for, ${f.injected} happened`);
  if (f.recovered < f.injected)
    failures.push(
      `store-failover: ${f.injected - f.recovered} of ${f.injected} never saw a new primary commit`,
    );
  if (v.notBack.nodes > 0) failures.push(`node-kill: ${v.notBack.nodes} killed nodes never came back`);
  if (v.notBack.blobs) failures.push('blobs-kill: the S3 daemon never came back');
  if (v.longTurns) failures.push(...redoneCallFailures(v.longTurns));
  return { passed: failures.length === 0, failures };
}

/** At most one model call redone per fault that hit a long turn, none without one, and some fault must hit one. */
function redoneCallFailures(r: RedoneCalls): string[] {
  const failures: string[] = [];
  if (!r.perFault.some((x) => x.fault !== null))
    failures.push('long turns: no fault hit one (they proved nothing)');
  for (const f of r.perFault.filter((x) => x.indices.length > 1)) {
    const what = f.fault
      ? `${f.fault.kind} at ${new Date(f.fault.at).toISOString()}`
      : 'an abort no fault explains';
    failures.push(
      `long turns: ${f.session} redid ${f.indices.length} model calls after ${what} (turn ${f.abortedTurn}): calls ${f.indices.join(', ')}; at most one per fault`,
    );
  }
  if (r.unattributed.length > 0)
    failures.push(
      `long turns: ${r.unattributed.length} model calls redone before any fault hit their session: ${r.unattributed
        .slice(0, MAX_LISTED)
        .map((c) => `${c.session} call ${c.index}`)
        .join('; ')}`,
    );
  return failures;
}
