/**
 * The real test cluster (scripts/kubernetes/start.sh): Kubernetes v1.20.2 built offline,
 * a runc node and a gVisor node, each on a Docker engine of its own. Started once per test
 * file; stop.sh removes it.
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import Dockerode from 'dockerode';
import { KubernetesRuntime, loadKubeConfig } from '../../src/runtime/index.js';

const SCRIPTS = join(import.meta.dirname, '..', '..', '..', 'scripts', 'kubernetes');
export const KUBE_STATE = process.env.BERTH_KUBE_STATE ?? '/var/lib/berth-kube';
export const KUBE_NAMESPACE = 'berth';

export interface KubeStack {
  kubeconfig: string;
  core: CoreV1Api;
  /** Selects both nodes of this machine (the RuntimeClass picks the gVisor one). */
  nodeSelector: string;
  /** The Docker engine of a node: where its Pods' containers are. */
  engine(node: 'runc' | 'runsc'): Dockerode;
  /** The environment of a berth host whose sandboxes are Pods of this cluster. */
  hostEnv: Record<string, string>;
  /** A runtime as such a host makes it. */
  runtime(): KubernetesRuntime;
}

/** Runs a stack script; its output goes to logFile; resolves to its stdout's last line. */
export function runStackScript(script: 'start.sh' | 'stop.sh', logFile: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [join(SCRIPTS, script)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const log = createWriteStream(logFile, { flags: 'a' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
      log.write(d);
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d;
      log.write(d);
    });
    child.on('close', (code) => {
      log.end();
      if (code === 0) resolve(stdout.trim().split('\n').at(-1) ?? '');
      else reject(new Error(`${script} exited ${code}: ${stderr.trim().split('\n').slice(-5).join(' | ')}`));
    });
  });
}

export async function startKubeStack(logFile: string): Promise<KubeStack> {
  const kubeconfig = await runStackScript('start.sh', logFile);
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const node = await core.readNode({ name: 'berth-kube-runc' });
  const machine = node.metadata?.labels?.['berth.dev/machine'] ?? '';
  const nodeSelector = `berth.dev/machine=${machine}`;
  return {
    kubeconfig,
    core,
    nodeSelector,
    engine: (n) => new Dockerode({ socketPath: join(KUBE_STATE, `node-${n}`, 'docker.sock') }),
    hostEnv: {
      BERTH_RUNTIME: 'kubernetes',
      BERTH_KUBECONFIG: kubeconfig,
      BERTH_KUBE_NAMESPACE: KUBE_NAMESPACE,
      BERTH_KUBE_NODE_SELECTOR: nodeSelector,
    },
    runtime: () =>
      new KubernetesRuntime(loadKubeConfig(kubeconfig), {
        namespace: KUBE_NAMESPACE,
        nodeSelector: { 'berth.dev/machine': machine },
        runtimeClassRunsc: 'gvisor',
      }),
  };
}
