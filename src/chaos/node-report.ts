/**
 * The chaos report's sections for runs on nodes and runs that kill the S3 service: what
 * each killed node went through, what a node's own engine costs, and what turns lived
 * through the S3 outage. Pure: inputs in, lines out.
 */
import type { Turn } from '../core/index.js';
import type { BlobsKill, Fault, NodeKill } from './fault-records.js';
import { type Stats, stats } from './fault-timing.js';
import type { NodeEngineUsage } from './node-usage.js';

export interface NodesInput {
  count: number;
  usage: NodeEngineUsage;
  /** Every start of every node: its engine answering, then the image copied in. */
  starts: { engineMs: number; imageMs: number }[];
}

export interface NodesSection {
  count: number;
  /** Each killed node: kill → all its processes dead, → its disk gone, → back up empty (null: not reached). */
  killed: {
    node: string;
    workerId: string;
    deadMs: number | null;
    droppedMs: number | null;
    restartedMs: number | null;
  }[];
  engine: NodeEngineUsage;
  engineStartMs: Stats | null;
  imageCopyMs: Stats | null;
}

export interface BlobsSection {
  /** SIGKILL → S3 answering again, ms; null if it did not come back. */
  downMs: number | null;
  /** Turns that were running at some time while it was down. */
  turnsDuring: number;
  /** Of those, committed: they waited for it. */
  committed: number;
  /** Of those, aborted with a blob store error (each cost its message a try). */
  abortedByBlobs: number;
}

export function nodesSection(input: NodesInput, faults: Fault[]): NodesSection {
  const kills = faults.filter((f): f is NodeKill => f.kind === 'node-kill');
  const since = (f: NodeKill, t: number | null) => (t === null ? null : t - f.at);
  return {
    count: input.count,
    killed: kills.map((f) => ({
      node: f.node,
      workerId: f.workerId,
      deadMs: since(f, f.deadAt),
      droppedMs: since(f, f.droppedAt),
      restartedMs: since(f, f.restartedAt),
    })),
    engine: input.usage,
    engineStartMs: stats(input.starts.map((s) => s.engineMs)),
    imageCopyMs: stats(input.starts.map((s) => s.imageMs)),
  };
}

export function blobsSection(faults: Fault[], turns: Turn[]): BlobsSection | null {
  const kill = faults.find((f): f is BlobsKill => f.kind === 'blobs-kill');
  if (!kill) return null;
  const until = kill.upAt ?? Number.POSITIVE_INFINITY;
  const during = turns.filter(
    (t) => t.startedAt <= until && (t.endedAt ?? Number.POSITIVE_INFINITY) >= kill.at,
  );
  return {
    downMs: kill.upAt === null ? null : kill.upAt - kill.at,
    turnsDuring: during.length,
    committed: during.filter((t) => t.status === 'committed').length,
    abortedByBlobs: during.filter(
      (t) =>
        t.status === 'aborted' && (t.errorCode === 'BLOB_WRITE_FAILED' || t.errorCode === 'BLOB_READ_FAILED'),
    ).length,
  };
}

export function renderNodes(n: NodesSection | null, b: BlobsSection | null): string[] {
  const lines: string[] = [];
  const p50 = (x: Stats | null) => (x ? String(Math.round(x.p50)) : '-');
  if (n) {
    const e = n.engine;
    lines.push(
      `nodes     ${n.count}, each its own netns, Docker engine, disk and worker; per node: engine (dockerd + containerd) ` +
        `${e.idleEngineRssMb} MiB idle, peak ${e.peakEngineRssMb} MiB with shims; engine CPU ${e.engineCpuSecPerNode} s ` +
        `over ${e.wallSec} s (${e.wallSec > 0 ? Math.round((e.engineCpuSecPerNode / e.wallSec) * 1000) / 10 : 0} % of a core); ` +
        `start: engine ${p50(n.engineStartMs)} ms, image copy ${p50(n.imageCopyMs)} ms (p50)`,
    );
    for (const k of n.killed)
      lines.push(
        `  node ${k.node} killed (worker ${k.workerId}): all dead after ${k.deadMs ?? '?'} ms, disk gone after ${k.droppedMs ?? '?'} ms, ` +
          `${k.restartedMs === null ? 'NOT back' : `back up empty after ${k.restartedMs} ms`}`,
      );
  }
  if (b)
    lines.push(
      `blobs     S3 daemon ${b.downMs === null ? 'did NOT come back' : `down ${b.downMs} ms (SIGKILL to answering again)`}; ` +
        `${b.turnsDuring} turns ran meanwhile: ${b.committed} committed, ${b.abortedByBlobs} aborted by a blob store error`,
    );
  return lines;
}
