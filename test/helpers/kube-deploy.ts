/**
 * deploy/kubernetes/ as published, and its worker DaemonSet as the test cluster can run it:
 * the image is the sandbox image with this checkout mounted as the app, the worker is on
 * the host's network (the test cluster has no kube-proxy, so it reaches the API server where
 * it listens), and its data dir is a host dir on a shared mount (Bidirectional propagation
 * needs one; systemd hosts have / shared, this machine may not).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type CoreV1Api,
  type KubernetesObject,
  loadAllYaml,
  PatchStrategy,
  setHeaderOptions,
  type V1DaemonSet,
  type V1Node,
} from '@kubernetes/client-node';

const run = promisify(execFile);
export const REPO = join(import.meta.dirname, '..', '..', '..');

/** Every object of deploy/kubernetes/, in file order. */
export async function publishedManifests(): Promise<KubernetesObject[]> {
  const dir = join(REPO, 'deploy', 'kubernetes');
  const files = (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort();
  const manifests: KubernetesObject[] = [];
  for (const f of files)
    manifests.push(...(loadAllYaml(await readFile(join(dir, f), 'utf8')) as KubernetesObject[]));
  return manifests;
}

export const RBAC_KINDS = ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'];

/**
 * The published DaemonSet with what this machine must change: the image, the checkout as
 * the app, the host's network, the data volume (`hostDir`, mounted at the same path) and
 * `env` over the published variables (the rest, secrets included, stay as published).
 */
export async function testWorkerDaemonSet(
  manifests: KubernetesObject[],
  o: { image: string; hostDir: string; env: Record<string, string> },
): Promise<V1DaemonSet> {
  const daemonSet = structuredClone(manifests.find((m) => m.kind === 'DaemonSet')) as V1DaemonSet;
  const pod = daemonSet.spec!.template.spec!;
  const worker = pod.containers[0]!;
  worker.image = o.image;
  worker.command = ['node', '/opt/berth-app/bin/berth.js'];
  worker.args = ['worker', '--slots', '2'];
  const overrides: Record<string, string> = {
    BERTH_IMAGE: o.image,
    KUBERNETES_SERVICE_HOST: '127.0.0.1',
    KUBERNETES_SERVICE_PORT: '16443',
    ...o.env,
  };
  worker.env = [
    ...(worker.env ?? []).filter((e) => !(e.name in overrides)),
    ...Object.entries(overrides).map(([name, value]) => ({ name, value })),
  ];
  worker.volumeMounts = [
    { name: 'data', mountPath: o.hostDir, mountPropagation: 'Bidirectional' },
    { name: 'app', mountPath: '/opt/berth-app', readOnly: true },
  ];
  pod.volumes = [
    { name: 'data', hostPath: { path: o.hostDir, type: 'Directory' } },
    { name: 'app', hostPath: { path: REPO, type: 'Directory' } },
  ];
  // A checkout whose node_modules links elsewhere (a git worktree's): that target, at its own path.
  const modules = await realpath(join(REPO, 'node_modules'));
  if (modules !== join(REPO, 'node_modules')) {
    worker.volumeMounts.push({ name: 'modules', mountPath: modules, readOnly: true });
    pod.volumes.push({ name: 'modules', hostPath: { path: modules, type: 'Directory' } });
  }
  pod.hostNetwork = true;
  return daemonSet;
}

/** A temp dir bind-mounted onto itself and made shared; `remove` unmounts everything under it, lazily. */
export async function sharedHostDir(prefix: string): Promise<{ path: string; remove(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  await run('mount', ['--bind', path, path]);
  await run('mount', ['--make-shared', path]);
  return {
    path,
    async remove() {
      // Lazily: the nodes' engines may still be tearing down the last container's mount namespace.
      await run('umount', ['-R', '-l', path]).catch(() => undefined);
      await rm(path, { recursive: true, force: true });
    },
  };
}

/** A JSON merge patch of a Node (null removes a key; a list replaces the list). */
export function patchNode(core: CoreV1Api, name: string, body: object): Promise<V1Node> {
  return core.patchNode({ name, body }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
}
