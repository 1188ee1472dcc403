/**
 * Sandbox start on Kubernetes against the Docker runtime, in the same run:
 *  - cold: a message to a session with no sandbox and no warm pool (BERTH_WARM_POOL=0,
 *    BERTH_IDLE_TIMEOUT=0): Pod created, scheduled, started by the kubelet, runner booted,
 *    turn run, reply — against the same with a Docker container;
 *  - warm: the same message when the pool holds a booted, unbound sandbox (a Pod or a
 *    container) that the claim binds through the gateway.
 * Each figure is message accepted → turn started and → reply. Needs the test cluster
 * (scripts/kubernetes/start.sh, root); it is started if not running, and stopped again only
 * if this run started it.
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KUBE_STATE, runStackScript, startKubeStack } from '../test/helpers/kube-stack.js';
import { type BenchOptions, benchHost, stats, timedMessage } from './harness.js';

export async function podStart({ quick }: BenchOptions) {
  const runs = quick ? 3 : 15;
  const wasRunning = existsSync(join(KUBE_STATE, 'ready'));
  const stackLog = join(tmpdir(), 'berth-kube-stack.log');
  const { hostEnv: kubeEnv } = await startKubeStack(stackLog);
  try {
    const docker = { cold: await measure({}, 'cold', runs), warm: await measure({}, 'warm', runs) };
    const kubernetes = {
      cold: await measure(kubeEnv, 'cold', runs),
      warm: await measure(kubeEnv, 'warm', runs),
    };
    const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;
    return {
      bench: 'pod-start',
      baselineDocker: docker,
      kubernetes,
      ratioColdReplyP50: ratio(kubernetes.cold.replyMs.p50, docker.cold.replyMs.p50),
      ratioWarmReplyP50: ratio(kubernetes.warm.replyMs.p50, docker.warm.replyMs.p50),
    };
  } finally {
    if (!wasRunning) await runStackScript('stop.sh', stackLog);
  }
}

async function measure(env: Record<string, string>, kind: 'cold' | 'warm', runs: number) {
  const h = await benchHost(
    {
      ...env,
      BERTH_IDLE_TIMEOUT: '0',
      BERTH_WARM_POOL: kind === 'warm' ? '1' : '0',
      BERTH_WARM_POOL_MIN: '1',
    },
    1,
  );
  const started: number[] = [];
  const reply: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      if (kind === 'warm')
        while (h.host.worker.warmPoolStats.ready < 1) await new Promise((r) => setTimeout(r, 10));
      const t = await timedMessage(h.client, `s${i}`, 'true');
      started.push(t.startedMs);
      reply.push(t.replyMs);
      while ((await h.host.store.getSessionView(`s${i}`, Date.now()))?.leaseOwner)
        await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    await h.close();
  }
  return { messageToTurnStartedMs: stats(started), replyMs: stats(reply) };
}
