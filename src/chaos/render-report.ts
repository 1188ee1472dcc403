/**
 * The chaos report as text for people: the settings and the run in a few lines, the
 * abort reasons, a table of the faults' hits and timings, the store failovers and the
 * partition, the long turns' redone model calls, the invariants, the requests that did not end ok, and the result last.
 * Pure: the report in, the text out (build-report.ts builds the report).
 */
import type { ChaosReport } from './build-report.js';
import { FAULT_KINDS, type Stats } from './fault-timing.js';
import { renderNodes } from './node-report.js';

export function renderReport(r: ChaosReport): string {
  const s = r.settings;
  const lines: string[] = [];
  const ms = (x: Stats | null, k: keyof Stats) => (x ? String(Math.round(x[k])) : '-');
  lines.push(
    `berth chaos: ${s.sessions} sessions x ${s.turns} turns, ${s.longTurns ? `${s.longTurns} long turns, ` : ''}${s.workers} workers x ${s.slotsPerWorker} slots, store ${s.store}, ` +
      `sandbox kill every ${s.killEveryMs.min / 1000}-${s.killEveryMs.max / 1000} s, workers killed at once ${s.killWorkers}, ` +
      (s.nodes === null ? '' : `${s.nodes} nodes, killed at once ${s.killNodes}, `) +
      (s.blobsDownMs === null ? '' : `S3 daemon killed for ${s.blobsDownMs / 1000} s, `) +
      `store restart ${s.storeDownMs === null ? 'off' : `${s.storeDownMs / 1000} s down`}, ` +
      `store failover ${s.storeFailovers.length === 0 ? 'off' : s.storeFailovers.join(', ')}, ` +
      `partition ${s.partitionMs === null ? 'off' : `${s.partitionMs / 1000} s`}, lease ${s.leaseMs / 1000} s, seed ${s.seed}`,
    `wall ${(r.wallMs / 1000).toFixed(1)} s${r.cutShort ? ' (cut short: --duration reached, or interrupted)' : ''}, data ${s.dataDir}${s.dataDirKept ? '' : ' (removed; --keep keeps it)'}`,
    '',
    `requests  planned ${r.requests.planned}  sent ${r.requests.sent}  ok ${r.requests.ok}  fail ${r.requests.fail}  ` +
      `unknown ${r.requests.unknown}  not sent ${r.requests.notSent}  (retries seen by clients ${r.requests.retriesSeen})`,
    `latency   ok requests, POST to reply, ms p50/p99/max ${ms(r.latencyMs, 'p50')}/${ms(r.latencyMs, 'p99')}/${ms(r.latencyMs, 'max')}`,
    `messages  inbound ${r.messages.inbound}  outbound ${r.messages.outbound}  user-visible errors ${r.userVisibleErrors}  ` +
      `acknowledged lost ${r.acknowledgedLost}  duplicate replies ${r.duplicateReplies}`,
    `faults    sandbox-kill ${r.faults['sandbox-kill']}  worker-kill ${r.faults['worker-kill']}  node-kill ${r.faults['node-kill']}  ` +
      `blobs-kill ${r.faults['blobs-kill']}  store-restart ${r.faults['store-restart']}  ` +
      `store-failover ${r.faults['store-failover']}  ` +
      `partition ${r.faults.partition}  (attempts that found no running sandbox: ${r.faults.skipped})`,
    `re-dispatches (aborted turns) ${r.redispatches}, of which ${r.unexplainedAborts.count} no injected fault explains`,
  );
  const l = r.load;
  lines.push(
    `load      host memory in use ${l.memoryBaselineMb} MiB before, peak ${l.peakMemoryMb} MiB (whole machine); ` +
      `berth processes peak RSS ${l.peakBerthRssMb} MiB` +
      (l.store
        ? `; store peak connections ${l.store.peakConnections}, commits ${l.store.commits} (${l.store.commitsPerSec}/s)`
        : ''),
  );
  lines.push(...renderNodes(r.nodes, r.blobs));
  for (const [reason, n] of Object.entries(r.abortReasons)) {
    const spontaneous = r.unexplainedAborts.reasons[reason] ?? 0;
    lines.push(
      `  ${String(n).padStart(4)}  ${spontaneous ? `(${spontaneous} unexplained) ` : ''}${reason || '(no error text)'}`,
    );
  }
  lines.push(
    '',
    'fault          injected  hit  missed  unrecov.  bit  detect ms p50/p99/max   recover ms p50/p99/max',
  );
  for (const kind of FAULT_KINDS) {
    const t = r.timing[kind];
    const triple = (x: Stats | null) => `${ms(x, 'p50')}/${ms(x, 'p99')}/${ms(x, 'max')}`.padEnd(24);
    lines.push(
      `${kind.padEnd(14)} ${String(t.injected).padStart(8)} ${String(t.hit).padStart(4)} ${String(t.missed).padStart(7)} ` +
        `${String(t.unrecovered).padStart(9)} ${String(r.faultsBit[kind]).padStart(4)}  ${triple(t.detectMs)}${triple(t.recoverMs)}`,
    );
  }
  lines.push(
    '  (missed = the fault ended no running turn: the sandbox was idle, starting or already done;',
    '   bit = faults that found a running turn: a store fault may only delay one; a kind asked for must bite)',
  );
  if (r.storeFailovers.length > 0) {
    lines.push(
      '',
      'store failover     killed  new primary  MTTD ms (first failed call)  MTTR ms (first commit on it)  promoted ms',
    );
    for (const f of r.storeFailovers)
      lines.push(
        `${f.what.padEnd(18)} ${f.member.padEnd(7)} ${(f.newPrimary ?? 'NONE').padEnd(12)} ${String(f.mttdMs ?? '-').padStart(27)}  ` +
          `${String(f.mttrMs ?? 'NOT RECOVERED').padStart(28)}  ${String(f.promotedMs ?? '-').padStart(11)}`,
      );
  }
  const p = r.partition;
  if (p)
    lines.push(
      `partition ${p.worker}: ${p.sandboxesAtCut} sandboxes ran its turns at the cut, ` +
        `${p.sandboxesAliveAfterLease ?? '?'} still running a lease later (0 = it fenced itself); ` +
        `late commits accepted ${p.lateCommitsAccepted}; link ${p.healed ? 'healed' : 'NOT healed'}`,
    );
  lines.push(...renderLongTurns(r.longTurns));
  lines.push('');
  lines.push('invariants');
  for (const inv of r.invariants) {
    lines.push(`  ${inv.passed ? 'PASS' : 'FAIL'}  ${inv.name.padEnd(22)} ${inv.summary}`);
    for (const d of inv.details) lines.push(`          ${d}`);
    for (const d of inv.excused) lines.push(`          excused: ${d}`);
  }
  if (r.notOk.length > 0) {
    lines.push('', 'requests that did not end ok');
    for (const q of r.notOk.slice(0, 20))
      lines.push(
        `  ${q.session} turn ${q.turn} (message ${q.messageId ?? '-'}): ${q.outcome} after ${q.endedAt - q.sentAt} ms ` +
          `(${q.eventsSeen} events, last ${q.lastEvent ?? '-'}): ${q.reason.slice(0, 160)}` +
          (q.excused ? ` [excused: ${q.excused}]` : ''),
      );
  }
  lines.push('', r.passed ? 'RESULT: PASS' : 'RESULT: FAIL');
  for (const f of r.failures) lines.push(`  ${f}`);
  return `${lines.join('\n')}\n`;
}

/** Per fault that hit a long turn, the model calls its retry redid upstream (at most one may be). */
function renderLongTurns(l: ChaosReport['longTurns']): string[] {
  if (!l) return [];
  const lines = [
    '',
    `long turns: ${l.calls} model calls reached the model; redone per fault that hit one (at most 1 each):`,
  ];
  for (const f of l.perFault) {
    const what = f.fault
      ? `${f.fault.kind} at ${new Date(f.fault.at).toISOString()}`
      : 'no fault explains it';
    const calls = f.indices.length > 0 ? ` (calls ${f.indices.join(', ')})` : '';
    lines.push(`  ${f.session} turn ${f.abortedTurn}, ${what}: ${f.indices.length} redone${calls}`);
  }
  for (const c of l.unattributed)
    lines.push(`  ${c.session} call ${c.index}: redone before any fault hit it`);
  return lines;
}
