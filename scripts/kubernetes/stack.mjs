#!/usr/bin/env node
// The API-side steps of start.sh and stop.sh, through the Kubernetes and Docker APIs (no
// kubectl, no docker CLI): wait for the API server, the engines and the nodes; load the pause
// image (built from the source tree's pause.c) and the sandbox images into each node's engine;
// create the namespace and the RuntimeClass. Usage: stack.mjs <step> <state dir> [args].
import { spawnSync } from 'node:child_process';
import { createReadStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, NodeV1Api } from '@kubernetes/client-node';
import Dockerode from 'dockerode';

const [step, state, ...args] = process.argv.slice(2);
const NODES = ['runc', 'runsc'];

function api(kind) {
  const kc = new KubeConfig();
  kc.loadFromFile(join(state, 'admin.kubeconfig'));
  return kc.makeApiClient(kind);
}

async function until(what, timeoutMs, probe) {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      if (await probe()) return;
    } catch (err) {
      last = err.message ?? String(err);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`${what} not ready after ${timeoutMs / 1000} s ${last}`);
}

async function loadImages() {
  const [pauseBinary, wanted] = args;
  const host = new Dockerode({ socketPath: process.env.BERTH_DOCKER_SOCKET ?? '/var/run/docker.sock' });
  // The sandbox images: those named, or every berth-base image the host's engine holds.
  const tags = wanted
    ? wanted.split(',')
    : (await host.listImages({ filters: { reference: ['berth-base'] } })).flatMap((i) => i.RepoTags ?? []);
  const dir = mkdtempSync(join(tmpdir(), 'berth-pause-'));
  try {
    writeFileSync(join(dir, 'pause'), readFileSync(pauseBinary), { mode: 0o755 });
    const tar = spawnSync('tar', ['-C', dir, '-cf', join(dir, 'rootfs.tar'), 'pause']);
    if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
    for (const n of NODES) {
      const engine = new Dockerode({ socketPath: join(state, `node-${n}`, 'docker.sock') });
      await new Promise((resolve, reject) =>
        engine.importImage(
          createReadStream(join(dir, 'rootfs.tar')),
          { repo: 'berth.local/pause', tag: '3.4.1', changes: ['ENTRYPOINT ["/pause"]', 'USER 65535:65535'] },
          (err, stream) =>
            err ? reject(err) : engine.modem.followProgress(stream, (e) => (e ? reject(e) : resolve())),
        ),
      );
      for (const tag of tags) {
        const image = await host.getImage(tag).get();
        await new Promise((resolve, reject) =>
          engine.loadImage(image, (err, stream) =>
            err ? reject(err) : engine.modem.followProgress(stream, (e) => (e ? reject(e) : resolve())),
          ),
        );
      }
      console.error(`node-${n}: berth.local/pause:3.4.1 ${tags.join(' ')}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function objects() {
  const core = api(CoreV1Api);
  const namespace = process.env.BERTH_KUBE_NAMESPACE ?? 'berth';
  await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(ignoreExists);
  // The ServiceAccount admission plugin refuses Pods until the controller made "default".
  await until('the default ServiceAccount', 60_000, async () =>
    Boolean(await core.readNamespacedServiceAccount({ name: 'default', namespace })),
  );
  await api(NodeV1Api)
    .createRuntimeClass({
      body: {
        metadata: { name: 'gvisor' },
        // dockershim (1.20) runs only the handler "docker"; the runsc node's engine runs everything under gVisor.
        handler: 'docker',
        scheduling: {
          nodeSelector: { 'berth.dev/runtime': 'runsc' },
          tolerations: [
            { key: 'berth.dev/runtime', operator: 'Equal', value: 'runsc', effect: 'NoSchedule' },
          ],
        },
      },
    })
    .catch(ignoreExists);
}

function ignoreExists(err) {
  if (err?.code !== 409) throw err;
}

const steps = {
  ping: () =>
    api(CoreV1Api)
      .listNode()
      .then(() => undefined),
  'wait-api': () =>
    until('the API server', 90_000, () =>
      api(CoreV1Api)
        .listNamespace()
        .then(() => true),
    ),
  'wait-docker': () =>
    until(`the engine at ${state}`, 60_000, () => new Dockerode({ socketPath: state }).ping()),
  'wait-nodes': () =>
    until('both nodes', 120_000, async () => {
      const nodes = (await api(CoreV1Api).listNode()).items;
      const ready = nodes.filter((n) =>
        n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      );
      return ready.length === NODES.length;
    }),
  'load-images': loadImages,
  objects,
};

if (!steps[step]) {
  console.error(`usage: stack.mjs ${Object.keys(steps).join('|')} <state dir> [args]`);
  process.exit(2);
}
steps[step]().then(
  () => process.exit(0),
  (err) => {
    console.error(`stack.mjs ${step}: ${err.message ?? err}`);
    process.exit(1);
  },
);
