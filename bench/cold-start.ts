/**
 * Cold turn start against a baseline taken in the same run:
 *  - baseline: `docker run --rm --network none <image> node -e 1` through the Engine API
 *    (create, start, wait, remove);
 *  - berth: message accepted → turn started and → reply, with BERTH_IDLE_TIMEOUT=0 so every
 *    turn gets a fresh sandbox (and a fresh overlay layer) and BERTH_WARM_POOL=0 so each one
 *    starts cold (the pool's empty-pool fallback);
 *  - the memory of an idle, bound sandbox (runner booted, waiting for work).
 */
import { resolveImage } from '../src/host/index.js';
import { type BenchOptions, benchHost, stats, timedMessage } from './harness.js';

export async function coldStart({ quick }: BenchOptions) {
  const runs = quick ? 5 : 20;
  const cold = await benchHost({ BERTH_IDLE_TIMEOUT: '0', BERTH_WARM_POOL: '0' }, 1);
  const { docker } = cold.host;
  const image = await resolveImage(docker, cold.config);
  const baseline: number[] = [];
  const started: number[] = [];
  const reply: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      const c = await docker.createContainer({
        Image: image,
        Cmd: ['node', '-e', '1'],
        HostConfig: { NetworkMode: 'none' },
      });
      await c.start();
      await c.wait();
      await c.remove();
      baseline.push(performance.now() - t0);

      const t = await timedMessage(cold.client, 'cold', 'true');
      started.push(t.startedMs);
      reply.push(t.replyMs);
      // The next message must find no sandbox: wait for this one's release.
      while ((await cold.host.store.getSessionView('cold', Date.now()))?.leaseOwner)
        await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    await cold.close();
  }

  const idle = await benchHost({ BERTH_IDLE_TIMEOUT: '60s' }, 1);
  let idleMiB = Number.NaN;
  try {
    await timedMessage(idle.client, 'idle', 'true');
    await new Promise((r) => setTimeout(r, 2000));
    const view = await idle.host.store.getSessionView('idle', Date.now());
    const st = (await idle.host.docker.getContainer(view!.sandbox!).stats({ stream: false })) as {
      memory_stats: { usage: number; stats?: Record<string, number> };
    };
    const inactiveFile =
      st.memory_stats.stats?.inactive_file ?? st.memory_stats.stats?.total_inactive_file ?? 0;
    idleMiB = Math.round(((st.memory_stats.usage - inactiveFile) / 2 ** 20) * 10) / 10;
  } finally {
    await idle.close();
  }
  const b = stats(baseline);
  const r = stats(reply);
  return {
    bench: 'cold-start',
    image,
    baselineDockerRunNodeMs: b,
    coldMessageToTurnStartedMs: stats(started),
    coldMessageToReplyMs: r,
    ratioColdReplyToBaselineP50: Math.round((r.p50 / b.p50) * 100) / 100,
    idleBoundSandboxMemoryMiB: idleMiB,
  };
}
