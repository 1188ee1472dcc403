/**
 * Sandbox start on Kubernetes against the Docker runtime, in the same run (issue 9):
 *  - cold: a message to a session with no sandbox and no warm pool (BERTH_WARM_POOL=0,
 *    BERTH_IDLE_TIMEOUT=0): Pod created, scheduled, started by the kubelet, runner booted,
 *    turn run, reply — against the same with a Docker container;
 *  - warm: the same message when the pool holds a booted, unbound sandbox (a Pod or a
 *    container) that the claim binds through the gateway.
 * Each figure is message accepted → turn started and → reply. Needs the test cluster
 * (scripts/kubernetes/start.sh, root); it is started if not running, and stopped again only
 * if this run started it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { type BenchOptions, benchHost, stats, timedMessage } from './harness.js';

const SCRIPTS = join(import.meta.dirname, '..', '..', 'scripts', 'kubernetes');
const STATE = process.env.BERTH_KUBE_STATE ?? '/var/lib/berth-kube';

export async function podStart({ quick }: BenchOptions) {
  const runs = quick ? 3 : 15;
  const wasRunning = existsSync(join(STATE, 'ready'));
  const kubeconfig = stackScript('start.sh');
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    const node = await kc.makeApiClient(CoreV1Api).readNode({ name: 'berth-kube-runc' });
    const kubeEnv = {
      BERTH_RUNTIME: 'kubernetes',
      BERTH_KUBECONFIG: kubeconfig,
      BERTH_KUBE_NODE_SELECTOR: `berth.dev/machine=${node.metadata?.labels?.['berth.dev/machine']}`,
    };
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
    if (!wasRunning) stackScript('stop.sh');
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

function stackScript(script: 'start.sh' | 'stop.sh'): string {
  const run = spawnSync('bash', [join(SCRIPTS, script)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (run.status !== 0) throw new Error(`${script} failed (exit ${run.status}); the test cluster needs root`);
  return run.stdout.trim().split('\n').at(-1) ?? '';
}
