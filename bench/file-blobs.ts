/**
 * `file` blobs (the one-machine default) against the workspace as it was before chains,
 * when a machine's tree was the only copy and a commit uploaded no layer object. The same
 * probe (file-blobs-probe.ts: warm replies, sustained turns/s) runs on each build in turn,
 * round by round, on this machine: this one, and one built from BERTH_BENCH_BASELINE_REF
 * (default: the commit before chains) in a throw-away git worktree that shares this
 * checkout's node_modules.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { BenchOptions, stats } from './harness.js';

const run = promisify(execFile);
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
/** The parent of the commit that made workspaces chains in the blob store. */
const BEFORE_CHAINS = '09510e9^';

type Probe = {
  writesNothingReplyMs: ReturnType<typeof stats>;
  writes4KiBReplyMs: ReturnType<typeof stats>;
  turnsPerSecond: number;
};

export async function fileBlobs({ quick }: BenchOptions) {
  const here = dirname(fileURLToPath(import.meta.url));
  const checkout = resolve(here, '../..');
  const ref = process.env.BERTH_BENCH_BASELINE_REF || BEFORE_CHAINS;
  const baseline = await mkdtemp(join(tmpdir(), 'berth-bench-baseline-'));
  await run('git', ['-C', checkout, 'worktree', 'add', '--detach', baseline, ref]).catch((err: Error) => {
    throw new Error(
      `fileBlobs needs the baseline ${ref} in this clone (${err.message.trim()}); fetch the full history (git fetch --unshallow) or set BERTH_BENCH_BASELINE_REF`,
    );
  });
  try {
    await symlink(join(checkout, 'node_modules'), join(baseline, 'node_modules'));
    await run(process.execPath, [join(checkout, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], {
      cwd: baseline,
    });
    const builds = { before: baseline, after: checkout };
    const probes: Record<keyof typeof builds, Probe[]> = { before: [], after: [] };
    const [turns, seconds] = quick ? [30, 5] : [100, 15];
    for (let i = 0; i < (quick ? 1 : 5); i++)
      for (const name of ['before', 'after'] as const) {
        const { stdout } = await run(
          process.execPath,
          [join(here, 'file-blobs-probe.js'), builds[name], String(turns), String(seconds)],
          { maxBuffer: 16 * 1024 * 1024 },
        );
        probes[name].push(JSON.parse(stdout.trim().split('\n').at(-1)!) as Probe);
      }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const summary = (name: keyof typeof builds) => ({
      writesNothingReplyP50Ms: median(probes[name].map((p) => p.writesNothingReplyMs.p50)),
      writes4KiBReplyP50Ms: median(probes[name].map((p) => p.writes4KiBReplyMs.p50)),
      turnsPerSecond: median(probes[name].map((p) => p.turnsPerSecond)),
    });
    // Each round's after against the before run just ahead of it: the machine drifts between rounds.
    const paired = (of: (p: Probe) => number, slower: 'after' | 'before') =>
      median(
        probes.after.map((a, i) => {
          const b = probes.before[i]!;
          return slower === 'after' ? ratio(of(a), of(b)) : ratio(of(b), of(a));
        }),
      );
    return {
      bench: 'file-blobs',
      baselineRef: ref,
      rounds: probes.after.length,
      before: summary('before'),
      after: summary('after'),
      // Medians of the rounds' ratios, ≤ 1.1 the target: after over before for latency, before over after for throughput.
      ratioWritesNothingReplyP50: paired((p) => p.writesNothingReplyMs.p50, 'after'),
      ratioWrites4KiBReplyP50: paired((p) => p.writes4KiBReplyMs.p50, 'after'),
      ratioTurnsPerSecond: paired((p) => p.turnsPerSecond, 'before'),
      probes,
    };
  } finally {
    await run('git', ['-C', checkout, 'worktree', 'remove', '--force', baseline]).catch(() => {});
    await rm(baseline, { recursive: true, force: true });
  }
}
