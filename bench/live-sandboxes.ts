/**
 * Live sandboxes: a worker's warm pool filled to N (500; 10 with --quick) and held, then
 * cleaned up, against a baseline taken in the same run: bare containers of the same image
 * (`node -e 'setInterval(...)'`, network none) started one by one through the Engine API.
 * Reports the time to start them all, each sandbox's own memory (its cgroup: usage minus
 * inactive file pages, sampled), its containerd shim's proportional memory, the growth of
 * the worker process (gateways), and the host's MemAvailable before vs after (noisy when
 * anything else runs on the machine).
 */
import { readdir, readFile } from 'node:fs/promises';
import type Dockerode from 'dockerode';
import { LABELS } from '../src/core/index.js';
import { resolveImage } from '../src/host/index.js';
import { type BenchOptions, benchHost, round, stats } from './harness.js';

const SAMPLE = 20;

export async function liveSandboxes({ quick }: BenchOptions) {
  const n = quick ? 10 : 500;
  const probe = await benchHost({ BERTH_WARM_POOL: '0' }, 1);
  let baseline: Awaited<ReturnType<typeof bareContainers>>;
  try {
    const image = await resolveImage(probe.host.docker, probe.config);
    baseline = await bareContainers(probe.host.docker, image, Math.min(n, SAMPLE));
  } finally {
    await probe.close();
  }
  const before = await memAvailableMiB();
  const workerRssBeforeMiB = process.memoryUsage().rss / 2 ** 20;
  const t0 = performance.now();
  const h = await benchHost({ BERTH_WARM_POOL: String(n), BERTH_WARM_POOL_MIN: String(n) }, 1);
  const { docker } = h.host;
  try {
    let lastReport = t0;
    while (h.host.worker.warmPoolStats.ready < n) {
      if (performance.now() - lastReport > 5000) {
        lastReport = performance.now();
        process.stderr.write(`live-sandboxes: ${h.host.worker.warmPoolStats.ready}/${n} ready\n`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    const startAllMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 3000)); // settle: runners idle, page cache quiet
    const after = await memAvailableMiB();
    const warm = await docker.listContainers({
      filters: { label: [`${LABELS.install}=${h.host.worker.installId}`, LABELS.pool] },
    });
    const sample = warm.slice(0, SAMPLE).map((c) => c.Id);
    const own = await Promise.all(sample.map((id) => containerMemoryMiB(docker, id)));
    const shims = await shimPssMiB(sample);
    const workerRssMiB = process.memoryUsage().rss / 2 ** 20;
    const t1 = performance.now();
    await h.close();
    const cleanupMs = performance.now() - t1;
    return {
      bench: 'live-sandboxes',
      sandboxes: n,
      baselineBareContainer: baseline,
      startAllSeconds: round(startAllMs / 1000),
      perSandboxStartMs: round(startAllMs / n),
      sandboxOwnMemoryMiB: stats(own),
      // Proportional set size: the shim's binary pages are shared by all shims.
      containerdShimPssMiB: stats(shims),
      perSandboxTotalMiB: round(stats(own).p50 + stats(shims).p50 + (workerRssMiB - workerRssBeforeMiB) / n),
      workerProcessGrowthMiB: round(workerRssMiB - workerRssBeforeMiB),
      hostMemoryPerSandboxMiB: round((before - after) / n),
      hostMemoryTotalMiB: round(before - after),
      cleanupSeconds: round(cleanupMs / 1000),
    };
  } finally {
    await h.close();
  }
}

async function bareContainers(docker: Dockerode, image: string, count: number) {
  const started: Dockerode.Container[] = [];
  const t0 = performance.now();
  try {
    for (let i = 0; i < count; i++) {
      const c = await docker.createContainer({
        Image: image,
        Cmd: ['node', '-e', 'setInterval(() => {}, 1e9)'],
        HostConfig: { NetworkMode: 'none' },
      });
      await c.start();
      started.push(c);
    }
    const perContainerStartMs = round((performance.now() - t0) / count);
    await new Promise((r) => setTimeout(r, 2000));
    const memory = await Promise.all(started.map((c) => containerMemoryMiB(docker, c.id)));
    return { containers: count, perContainerStartMs, ownMemoryMiB: stats(memory) };
  } finally {
    await Promise.all(started.map((c) => c.remove({ force: true }).catch(() => undefined)));
  }
}

async function containerMemoryMiB(docker: Dockerode, id: string): Promise<number> {
  const s = (await docker.getContainer(id).stats({ stream: false })) as {
    memory_stats: { usage: number; stats?: Record<string, number> };
  };
  const inactive = s.memory_stats.stats?.inactive_file ?? s.memory_stats.stats?.total_inactive_file ?? 0;
  return round((s.memory_stats.usage - inactive) / 2 ** 20);
}

async function memAvailableMiB(): Promise<number> {
  const m = /MemAvailable:\s+(\d+) kB/.exec(await readFile('/proc/meminfo', 'utf8'));
  return Number(m![1]) / 1024;
}

/** Pss of the containerd shim of each container (one shim process per container). */
async function shimPssMiB(ids: string[]): Promise<number[]> {
  const out: number[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const args = cmdline.split('\0');
    const id = args[args.indexOf('-id') + 1];
    if (!args[0]?.endsWith('containerd-shim-runc-v2') || !id || !ids.includes(id)) continue;
    const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
    const m = /^Pss:\s+(\d+) kB/m.exec(rollup);
    if (m) out.push(round(Number(m[1]) / 1024));
  }
  return out;
}
