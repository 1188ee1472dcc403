/**
 * What each node's own Docker engine costs the machine, sampled every second while the
 * workload runs: resident memory of dockerd and containerd (the fixed cost of an engine per
 * node) and of the containerd shims (one per container, as on any engine), and the CPU time
 * all of them used (from /proc, so a process that died in a node kill keeps what it used).
 *
 * Invariants: it only reads /proc; a sample a dying process cannot answer is skipped.
 */
import { readFile } from 'node:fs/promises';

export interface NodeEngineUsage {
  /** dockerd + containerd of one node just after it started (its image loaded), MiB: mean over the nodes. */
  idleEngineRssMb: number;
  /** dockerd + containerd + shims of one node at its highest, MiB: the highest node. */
  peakEngineRssMb: number;
  /** CPU seconds the engine processes of one node used over the workload: mean over the nodes. */
  engineCpuSecPerNode: number;
  /** The workload's wall time the CPU is measured over, s. */
  wallSec: number;
}

const SAMPLE_MS = 1000;
/** Linux's USER_HZ: /proc/<pid>/stat times are in 1/100 s. */
const TICKS_PER_SEC = 100;
const ENGINE_COMMANDS = new Set(['dockerd', 'containerd', 'containerd-shim']);

interface ProcSample {
  comm: string;
  rssKb: number;
  cpuTicks: number;
}

export class NodeUsageSampler {
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;
  private readonly idleKb: number[] = [];
  private peakKb = 0;
  /** Per node, per pid: CPU ticks when first seen (0 for one born during the run) and last seen. */
  private readonly cpu: Map<number, { first: number; last: number }>[];
  private sampling: Promise<void> = Promise.resolve();

  constructor(private readonly enginePids: (() => Promise<number[]>)[]) {
    this.cpu = enginePids.map(() => new Map());
  }

  /** The idle engines' memory, once every node is up; then samples until `stop`. */
  async start(): Promise<void> {
    this.startedAt = Date.now();
    for (const [node, pids] of this.enginePids.entries()) {
      let kb = 0;
      for (const pid of await pids()) {
        const p = await procSample(pid);
        if (!p || !ENGINE_COMMANDS.has(p.comm)) continue;
        if (p.comm !== 'containerd-shim') kb += p.rssKb;
        this.cpu[node]!.set(pid, { first: p.cpuTicks, last: p.cpuTicks });
      }
      this.idleKb.push(kb);
    }
    this.timer = setInterval(() => {
      this.sampling = this.sample().catch(() => undefined);
    }, SAMPLE_MS);
  }

  async stop(): Promise<NodeEngineUsage> {
    clearInterval(this.timer);
    await this.sampling;
    await this.sample().catch(() => undefined);
    const nodes = this.cpu.length;
    const ticks = this.cpu.map((m) => [...m.values()].reduce((sum, t) => sum + t.last - t.first, 0));
    const mb = (kb: number) => Math.round(kb / 1024);
    return {
      idleEngineRssMb: mb(this.idleKb.reduce((a, b) => a + b, 0) / Math.max(1, nodes)),
      peakEngineRssMb: mb(this.peakKb),
      engineCpuSecPerNode:
        Math.round((ticks.reduce((a, b) => a + b, 0) / Math.max(1, nodes) / TICKS_PER_SEC) * 10) / 10,
      wallSec: Math.round((Date.now() - this.startedAt) / 1000),
    };
  }

  private async sample(): Promise<void> {
    for (const [node, pids] of this.enginePids.entries()) {
      let kb = 0;
      for (const pid of await pids()) {
        const p = await procSample(pid);
        if (!p || !ENGINE_COMMANDS.has(p.comm)) continue;
        kb += p.rssKb;
        const seen = this.cpu[node]!.get(pid);
        if (seen) seen.last = p.cpuTicks;
        else this.cpu[node]!.set(pid, { first: 0, last: p.cpuTicks });
      }
      this.peakKb = Math.max(this.peakKb, kb);
    }
  }
}

/** comm (shims' is cut to 15 characters: containerd-shim), RSS and utime + stime of a process. */
async function procSample(pid: number): Promise<ProcSample | null> {
  const [stat, status] = await Promise.all([
    readFile(`/proc/${pid}/stat`, 'utf8').catch(() => ''),
    readFile(`/proc/${pid}/status`, 'utf8').catch(() => ''),
  ]);
  const m = /^\d+ \((.*)\) (.*)$/s.exec(stat.trim());
  if (!m) return null;
  const fields = m[2]!.split(' ');
  // After "(comm)": state is field 3 of stat(5), utime 14 and stime 15.
  const cpuTicks = Number(fields[11]) + Number(fields[12]);
  const rssKb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
  return { comm: m[1]!.slice(0, 15), rssKb, cpuTicks };
}
