/**
 * The kubernetes runtime against a real cluster built offline (scripts/kubernetes/): the
 * runtime conformance cases of the Docker runtime (hardening, exit detection, kill,
 * label-scoped listing and reaping, bind, commit), messages end to end through Pods (cold
 * and from the warm pool), a gVisor Pod verified to run under runsc, Pods deleted mid-turn,
 * and a stack stop that leaves nothing behind.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { access, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import {
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
  type V1DaemonSet,
} from '@kubernetes/client-node';
import { FileBlobStore } from '../src/blobs/index.js';
import type { ScriptPlan } from '../src/core/index.js';
import { type KubernetesRuntime, podName, stageRunner } from '../src/runtime/index.js';
import { installIdOf } from '../src/worker/index.js';
import { Workspaces } from '../src/workspace/index.js';
import {
  KUBE_NAMESPACE,
  KUBE_STATE,
  type KubeStack,
  runStackScript,
  startKubeStack,
} from './helpers/kube-stack.js';
import { eventually } from './helpers/processes.js';
import { testSandboxSpec } from './helpers/sandbox-spec.js';
import { startTestHost } from './helpers/test-host.js';

const plan = (p: ScriptPlan) => JSON.stringify(p);
const run = promisify(execFile);
const IMAGE_ENV = process.env.BERTH_IMAGE;
/** The cluster needs root (engines, kubelets); BERTH_KUBE_TESTS=0 opts out. Skipped with the reason, never faked. */
const SKIP =
  process.env.BERTH_KUBE_TESTS === '0'
    ? 'needs the Kubernetes test cluster, turned off by BERTH_KUBE_TESTS=0 (docs/kubernetes.md)'
    : process.getuid?.() !== 0
      ? 'needs root: the Kubernetes test cluster runs engines and kubelets (scripts/kubernetes/start.sh)'
      : false;
let stack: KubeStack;
const stackLog = join(tmpdir(), 'berth-kube-stack.log');
const SYSCTLS = ['vm.overcommit_memory', 'vm.panic_on_oom', 'kernel.panic', 'kernel.panic_on_oops'];
let sysctlsBefore: Record<string, string>;
/** Host paths a kubelet creates whatever its flags say (and the dockershim socket it must not share). */
const HOST_PATHS = [
  '/var/log/pods',
  '/var/log/containers',
  '/var/lib/kubelet',
  '/usr/libexec/kubernetes',
  '/var/run/dockershim.sock',
];
let hostPathsBefore: string[];
const existing = async (paths: string[]) =>
  (
    await Promise.all(
      paths.map((p) =>
        access(p).then(
          () => p,
          () => '',
        ),
      ),
    )
  ).filter(Boolean);

async function readSysctls(): Promise<Record<string, string>> {
  const entries = await Promise.all(
    SYSCTLS.map(async (k) => [k, (await readFile(`/proc/sys/${k.replaceAll('.', '/')}`, 'utf8')).trim()]),
  );
  return Object.fromEntries(entries);
}

before(
  async () => {
    if (SKIP) return;
    // A fresh stack: one left running (e.g. by an interrupted run) would hide what start changes.
    await runStackScript('stop.sh', stackLog);
    sysctlsBefore = await readSysctls();
    hostPathsBefore = await existing(HOST_PATHS);
    stack = await startKubeStack(stackLog);
  },
  { timeout: 60 * 60_000 },
);
/** BERTH_KUBE_KEEP=1 leaves the cluster up after the tests, to look at (kubelet logs in its state dir's log/). */
const KEEP = process.env.BERTH_KUBE_KEEP === '1';
after(async () => {
  if (SKIP || KEEP) return;
  await runStackScript('stop.sh', stackLog).catch(() => undefined);
});

/** The runner container of a Pod, in its node's engine. */
async function runnerContainer(node: 'runc' | 'runsc', pod: string) {
  const engine = stack.engine(node);
  const [found] = await engine.listContainers({
    all: true,
    filters: { label: [`io.kubernetes.pod.name=${pod}`, 'io.kubernetes.container.name=runner'] },
  });
  assert.ok(found, `no runner container for Pod ${pod} on node ${node}`);
  return engine.getContainer(found.Id);
}

test('runtime conformance on Kubernetes: hardening, exit detection, kill, label-scoped listing', {
  skip: SKIP,
}, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-kube-rt-'));
  const runtime = stack.runtime();
  const workspaces = new Workspaces(dir, 1000, new FileBlobStore(join(dir, 'blobs')));
  await workspaces.prepare();
  const runnerDir = await stageRunner(join(dir, 'runner'));
  const image = IMAGE_ENV ?? (await baseImage());
  await runtime.check(image);
  const spec = (install: string, session: string) =>
    testSandboxSpec({ image, dir, runnerDir, workspaces }, install, session);
  const abort = new AbortController();
  const exits: { name: string; exitCode: number | null }[] = [];
  const connected = new Promise<void>((resolve) => {
    void (async () => {
      for await (const e of runtime.events('kubetest', abort.signal)) {
        if (e.type === 'connected') resolve();
        if (e.type === 'exit') exits.push({ name: e.name, exitCode: e.exitCode });
      }
    })();
  });
  await connected;
  const mine = await runtime.create(await spec('kubetest', 'Sess_1'));
  const theirs = await runtime.create(await spec('otherinstall', 'Sess_1'));
  t.after(async () => {
    abort.abort();
    await runtime.kill(mine, 'test done');
    await runtime.kill(theirs, 'test done');
    await workspaces.release();
    await rm(dir, { recursive: true, force: true });
  });

  await t.test('the Pod: deterministic name, labels, no token, no host namespaces, Guaranteed', async () => {
    assert.equal(mine.id, podName('berth-kubetest-Sess_1-g1'));
    const pod = await stack.core.readNamespacedPod({ name: mine.id, namespace: KUBE_NAMESPACE });
    assert.equal(pod.metadata?.labels?.['berth.install'], 'kubetest');
    assert.equal(pod.metadata?.labels?.['berth.session'], 'Sess_1');
    assert.equal(pod.metadata?.labels?.['berth.generation'], '1');
    assert.equal(pod.spec?.automountServiceAccountToken, false);
    assert.equal(pod.spec?.enableServiceLinks, false);
    assert.ok(!pod.spec?.hostNetwork && !pod.spec?.hostPID && !pod.spec?.hostIPC);
    assert.equal(pod.spec?.nodeName, 'berth-kube-runc');
    assert.equal(pod.status?.qosClass, 'Guaranteed');
    const [c] = pod.spec?.containers ?? [];
    assert.ok(c);
    assert.equal(c.securityContext?.allowPrivilegeEscalation, false);
    assert.equal(c.securityContext?.readOnlyRootFilesystem, true);
    assert.deepEqual(c.securityContext?.capabilities?.drop, ['ALL']);
    assert.equal(c.securityContext?.seccompProfile?.type, 'RuntimeDefault');
    assert.equal(pod.spec?.securityContext?.runAsUser, 1000);
    assert.ok(
      !(c.volumeMounts ?? []).some((m) => m.mountPath.includes('serviceaccount')),
      'no token mounted',
    );
  });

  await t.test('the container the kubelet made carries the hardening', async () => {
    const info = await (await runnerContainer('runc', mine.id)).inspect();
    const h = info.HostConfig;
    assert.equal(h.ReadonlyRootfs, true);
    assert.deepEqual(h.CapDrop, ['ALL']);
    assert.deepEqual(h.CapAdd ?? [], []);
    assert.ok(h.SecurityOpt?.includes('no-new-privileges'), `SecurityOpt ${JSON.stringify(h.SecurityOpt)}`);
    assert.ok(!(h.SecurityOpt ?? []).some((o: string) => /seccomp[:=]unconfined/.test(o)), 'seccomp is on');
    assert.equal(h.Privileged, false);
    assert.equal(h.Memory, 300 * 1024 * 1024);
    assert.equal(h.CpuQuota, 50_000, 'half a CPU (100 ms period)');
    assert.equal(info.Config.User, '1000:1000');
    const mounts = Object.fromEntries(
      info.Mounts.map((m) => [m.Destination, `${m.RW ? 'rw' : 'ro'} ${m.Propagation || ''}`.trim()]),
    );
    assert.equal(mounts['/opt/berth'], 'ro rprivate');
    assert.equal(mounts['/run/berth'], 'ro rprivate');
    assert.equal(mounts['/workspace'], 'rw rslave');
  });

  await t.test('list sees only this install', async () => {
    const listed = await runtime.list('kubetest');
    assert.deepEqual(
      listed.map((h) => [h.id, h.name]),
      [[mine.id, 'berth-kubetest-Sess_1-g1']],
    );
  });

  // No gateway listens in this test: each runner finds none and exits, as a crashed runner would.
  await t.test(
    'a runner that exits is an exit event with its code, watched, for its own install only',
    async () => {
      const seen = await firstExit(stack.runtime(), 'otherinstall');
      assert.equal(seen.name, 'berth-otherinstall-Sess_1-g1');
      assert.equal(typeof seen.exitCode, 'number');
      const own = await eventually('own exit', async () =>
        exits.find((e) => e.name === 'berth-kubetest-Sess_1-g1'),
      );
      assert.equal(typeof own.exitCode, 'number');
      assert.ok(
        !exits.some((e) => e.name === seen.name),
        "another install's exit is not reported to this one",
      );
    },
  );

  await t.test('kill removes the Pod, idempotently, and is reported', async () => {
    await runtime.kill(mine, 'test');
    await runtime.kill(mine, 'idempotent');
    await runtime.kill({ id: '', name: 'berth-kubetest-Sess_1-g1' }, 'by name');
    assert.deepEqual(await runtime.list('kubetest'), []);
    assert.equal((await runtime.list('otherinstall')).length, 1, "another install's Pod is untouched");
  });
});

test('messages through Pods from the warm pool: bind at claim, state and workspace commit, no network, orphans reaped', {
  skip: SKIP,
}, async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-kube-e2e-'));
  const installId = installIdOf(dataDir);
  // A Pod of this install left by a worker that no longer exists: reaped when the worker starts.
  const orphanRuntime = stack.runtime();
  const orphanDir = await mkdtemp(join(tmpdir(), 'berth-kube-orphan-'));
  const orphanSlots = new Workspaces(orphanDir, 1000, new FileBlobStore(join(orphanDir, 'blobs')));
  await orphanSlots.prepare();
  const orphan = await orphanRuntime.create(
    await testSandboxSpec(
      {
        image: IMAGE_ENV ?? (await baseImage()),
        dir: orphanDir,
        runnerDir: await stageRunner(join(orphanDir, 'runner')),
        workspaces: orphanSlots,
      },
      installId,
      'gone',
      { workerId: 'wrk_deadbeef', memoryMb: 128, cpus: 0.2 },
    ),
  );
  t.after(async () => {
    await orphanRuntime.kill(orphan, 'test done');
    await orphanSlots.release();
    await rm(orphanDir, { recursive: true, force: true });
  });

  const lab = await startTestHost(
    t,
    { ...stack.hostEnv, BERTH_WARM_POOL: '1', BERTH_WARM_POOL_MIN: '1', BERTH_IDLE_TIMEOUT: '0' },
    { dataDir },
  );
  assert.equal(
    (await orphanRuntime.list(installId)).some((h) => h.id === orphan.id),
    false,
    'the orphan Pod was reaped at start',
  );
  await lab.client.request('POST', '/v1/agents', { name: 'cmd', provider: 'command' });
  const reply = async (session: string, text: string) => {
    const events = await lab.sendAndCollect(session, { agent: 'cmd', text }, (e) =>
      ['reply', 'failed'].includes(e.type),
    );
    const last = events.at(-1)!;
    assert.equal(last.type, 'reply', JSON.stringify(last.data));
    return String(last.data.text).trim();
  };
  // The pool's Pod, started before any message: no session label, bound at claim through the gateway.
  const pooled = await eventually('a warm Pod', async () => {
    const pods = await stack.core.listNamespacedPod({
      namespace: KUBE_NAMESPACE,
      labelSelector: `berth.install=${installId},berth.pool`,
    });
    return pods.items.find((p) => p.status?.phase === 'Running');
  });
  assert.equal(pooled.metadata?.labels?.['berth.session'], undefined);

  // The Pod's network: loopback and an address that leads nowhere (no route at all).
  assert.equal(
    await reply(
      'k1',
      'echo hello > note.txt && ls /sys/class/net | sort | tr "\\n" " "; wc -l < /proc/net/route',
    ),
    'eth0 lo 1',
  );
  const view = await lab.host.store.getSessionView('k1', Date.now());
  assert.match(view?.sandbox ?? '', /-pool-/, 'the first turn ran in the warm Pod');
  const after = await stack.core.readNamespacedPod({
    name: pooled.metadata!.name!,
    namespace: KUBE_NAMESPACE,
  });
  assert.equal(after.metadata?.uid, pooled.metadata?.uid, 'the same Pod');
  assert.deepEqual(
    after.spec?.containers,
    pooled.spec?.containers,
    'its spec did not change for the session',
  );
  // The next turn gets another sandbox (idle timeout 0): it sees what the first committed.
  assert.equal(await reply('k1', 'cat note.txt'), 'hello');
  const turns = await lab.host.store.listTurns('k1');
  assert.deepEqual(
    turns.map((x) => x.status),
    ['committed', 'committed'],
  );
});

test('a gVisor agent runs in a Pod on the runsc node, under gVisor', { skip: SKIP }, async (t) => {
  const lab = await startTestHost(t, { ...stack.hostEnv, BERTH_IDLE_TIMEOUT: '30s' });
  await lab.client.request('POST', '/v1/agents', { name: 'gv', provider: 'command', isolation: 'runsc' });
  const events = await lab.sendAndCollect(
    'g1',
    { agent: 'gv', text: 'dmesg | head -n 3; cat /proc/version' },
    (e) => ['reply', 'failed'].includes(e.type),
  );
  const last = events.at(-1)!;
  assert.equal(last.type, 'reply', JSON.stringify(last.data));
  assert.match(String(last.data.text), /gVisor/, 'the kernel the job sees is gVisor');
  const sandbox = (await lab.host.store.getSessionView('g1', Date.now()))?.sandbox ?? '';
  const pod = await stack.core.readNamespacedPod({ name: podName(sandbox), namespace: KUBE_NAMESPACE });
  assert.equal(pod.spec?.runtimeClassName, 'gvisor');
  assert.equal(pod.spec?.nodeName, 'berth-kube-runsc');
  const info = await (await runnerContainer('runsc', pod.metadata!.name!)).inspect();
  assert.equal(info.HostConfig.Runtime, 'node-runsc', "the node engine's gVisor runtime ran it");
});

test('Pods deleted mid-turn: every turn is retried in a new Pod and every message is answered once', {
  skip: SKIP,
}, async (t) => {
  const lab = await startTestHost(t, { ...stack.hostEnv, BERTH_WARM_POOL: '0', BERTH_RETRY_BASE: '200ms' });
  await lab.client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  const sessions = ['c1', 'c2', 'c3'];
  const deletions: Promise<unknown>[] = [];
  const deleted = new Set<string>();
  // c3's runner is killed in its node's engine (a crash); the others' Pods are deleted through the API.
  const results = await Promise.all(
    sessions.map((id) =>
      lab.sendAndCollect(
        id,
        {
          agent: 'scr',
          text: plan({ steps: [{ progress: 'working' }, { sleep: 3000 }], reply: `survived ${id}` }),
        },
        (e) => {
          if (e.type === 'progress' && !deleted.has(id)) {
            deleted.add(id);
            deletions.push(
              lab.host.store.getSessionView(id, Date.now()).then(async (v) => {
                const name = podName(v!.sandbox!);
                if (id === 'c3') await (await runnerContainer('runc', name)).kill({ signal: 'SIGKILL' });
                else
                  await stack.core.deleteNamespacedPod({
                    name,
                    namespace: KUBE_NAMESPACE,
                    gracePeriodSeconds: 0,
                  });
              }),
            );
          }
          return e.type === 'reply';
        },
        120_000,
      ),
    ),
  );
  await Promise.all(deletions);
  for (const [i, id] of sessions.entries()) {
    assert.equal(results[i]!.at(-1)?.data.text, `survived ${id}`);
    const turns = await lab.host.store.listTurns(id);
    assert.equal(turns.filter((x) => x.status === 'committed').length, 1, `${id}: committed once`);
    assert.ok(
      turns.some((x) => x.status === 'aborted'),
      `${id}: the turn whose Pod was deleted was aborted: ${JSON.stringify(turns.map((x) => x.status))}`,
    );
    const [inbound] = await lab.host.store.listMessages(id, 0, 1);
    assert.equal(inbound?.status, 'done');
  }
});

test('deploy/kubernetes: the API server accepts every manifest; the worker DaemonSet serves a message through hostPath gateway sockets', {
  skip: SKIP,
}, async (t) => {
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  const objects = KubernetesObjectApi.makeApiClient(kc);
  let daemonSetToDelete: KubernetesObject = { kind: 'DaemonSet' };
  let rbacToDelete: KubernetesObject[] = [];
  const repo = join(import.meta.dirname, '..', '..');
  const dir = join(repo, 'deploy', 'kubernetes');
  const files = (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort();
  const manifests: KubernetesObject[] = [];
  for (const f of files)
    manifests.push(...(loadAllYaml(await readFile(join(dir, f), 'utf8')) as KubernetesObject[]));
  assert.ok(manifests.length >= 10, `${manifests.length} objects`);
  // Each object as published, validated by the real API server (server-side dry run; 409: it exists already).
  for (const o of manifests) {
    await objects.create(o, undefined, 'All').catch((err: { code?: number; body?: unknown }) => {
      if (err.code !== 409)
        throw new Error(`${o.kind} ${o.metadata?.name}: ${err.code} ${JSON.stringify(err.body)}`);
    });
  }

  // The DaemonSet for real, on this machine: the worker runs in a Pod on the runc node with the RBAC above and
  // the in-cluster config; the API is a host process on the same data dir (SQLite), as a node would share it.
  // Bidirectional propagation needs the data dir on a shared mount (systemd hosts: / is shared).
  const shared = await mkdtemp(join(tmpdir(), 'berth-kube-ds-'));
  await run('mount', ['--bind', shared, shared]);
  await run('mount', ['--make-shared', shared]);
  const dataDir = join(shared, 'data');
  await mkdir(dataDir);
  // Hooks run in order: the worker Pod ends, then the API host (its own hook), then the mount goes.
  t.after(async () => {
    for (const o of [daemonSetToDelete, ...rbacToDelete]) await objects.delete(o).catch(() => undefined);
    await eventually(
      'the worker Pod gone',
      async () => {
        const pods = await stack.core.listNamespacedPod({
          namespace: KUBE_NAMESPACE,
          labelSelector: 'app.kubernetes.io/name=berth-worker',
        });
        return pods.items.length === 0 ? true : undefined;
      },
      60_000,
    );
  });
  const lab = await startTestHost(
    t,
    { ...stack.hostEnv, BERTH_SLOTS: '0', BERTH_IDLE_TIMEOUT: '0' },
    { dataDir },
  );
  const image = IMAGE_ENV ?? (await baseImage());
  const rbac = manifests.filter((o) =>
    ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind!),
  );
  const daemonSet = structuredClone(manifests.find((o) => o.kind === 'DaemonSet')) as V1DaemonSet;
  const pod = daemonSet.spec!.template.spec!;
  const [worker] = pod.containers;
  assert.ok(worker);
  worker.image = image;
  worker.command = ['node', '/opt/berth-app/bin/berth.js'];
  worker.args = ['worker', '--slots', '2'];
  const overrides: Record<string, string> = {
    BERTH_DATA: dataDir,
    BERTH_IMAGE: image,
    BERTH_KUBE_NODE_SELECTOR: stack.nodeSelector,
    BERTH_IDLE_TIMEOUT: '0',
    // No kube-proxy in the test cluster: the API server is reached where it listens.
    KUBERNETES_SERVICE_HOST: '127.0.0.1',
    KUBERNETES_SERVICE_PORT: '16443',
  };
  worker.env = [
    ...(worker.env ?? []).filter((e) => e.name !== 'BERTH_STORE' && !(e.name in overrides)),
    ...Object.entries(overrides).map(([name, value]) => ({ name, value })),
  ];
  worker.volumeMounts = [
    { name: 'data', mountPath: dataDir, mountPropagation: 'Bidirectional' },
    { name: 'app', mountPath: '/opt/berth-app', readOnly: true },
  ];
  pod.volumes = [
    { name: 'data', hostPath: { path: dataDir, type: 'Directory' } },
    { name: 'app', hostPath: { path: repo, type: 'Directory' } },
  ];
  pod.nodeSelector = { 'berth.dev/runtime': 'runc' };
  pod.hostNetwork = true;
  t.after(async () => {
    // The worker's sandboxes (its warm Pods) hold mounts of the data dir until they are gone.
    const sandboxes = `berth.install=${installIdOf(dataDir)}`;
    await stack.core.deleteCollectionNamespacedPod({ namespace: KUBE_NAMESPACE, labelSelector: sandboxes });
    await eventually(
      'the worker’s sandbox Pods gone',
      async () => {
        const pods = await stack.core.listNamespacedPod({
          namespace: KUBE_NAMESPACE,
          labelSelector: sandboxes,
        });
        return pods.items.length === 0 ? true : undefined;
      },
      60_000,
    );
    // Lazily: the node's engines may still be tearing down the last container's mount namespace.
    await run('umount', ['-R', '-l', shared]);
    await rm(shared, { recursive: true, force: true });
  });
  daemonSetToDelete = daemonSet;
  rbacToDelete = rbac;
  for (const o of [...rbac, daemonSet]) await objects.create(o);
  const registered = await eventually(
    'the DaemonSet worker registered in the store',
    async () => (await lab.host.store.listWorkers()).find((w) => w.slots === 2),
    120_000,
  ).catch(async (err: Error) => {
    // The worker's own output, from its node's engine (the newest of its containers).
    const engine = stack.engine('runc');
    const [last] = await engine.listContainers({
      all: true,
      filters: { label: ['io.kubernetes.container.name=worker'] },
    });
    const log = last
      ? `${JSON.stringify((await engine.getContainer(last.Id).inspect()).State)} ${await engine
          .getContainer(last.Id)
          .logs({ stdout: true, stderr: true, tail: 40 })}`
      : 'no worker container';
    throw new Error(`${err.message}; worker log: ${log}`);
  });
  await lab.client.request('POST', '/v1/agents', { name: 'cmd', provider: 'command' });
  const events = await lab.sendAndCollect(
    'ds1',
    { agent: 'cmd', text: 'echo from-a-daemonset-worker' },
    (e) => ['reply', 'failed'].includes(e.type),
  );
  assert.equal(events.at(-1)?.type, 'reply', JSON.stringify(events.at(-1)?.data));
  assert.equal(String(events.at(-1)?.data.text).trim(), 'from-a-daemonset-worker');
  const turns = await lab.host.store.listTurns('ds1');
  assert.equal(turns[0]?.workerId, registered.id, 'the DaemonSet worker ran the turn');
});

test('the stack stops and leaves nothing behind', {
  skip: SKIP || (KEEP && 'BERTH_KUBE_KEEP=1 keeps the stack for a look, so its clean-up is not tested'),
}, async () => {
  await runStackScript('stop.sh', stackLog);
  const mounts = await readFile('/proc/self/mountinfo', 'utf8');
  assert.ok(!mounts.includes(KUBE_STATE), 'no mount under the state dir');
  assert.deepEqual(await readSysctls(), sysctlsBefore, 'the sysctls the kubelet changed are back');
  assert.deepEqual(await existing(HOST_PATHS), hostPathsBefore, 'no host path the kubelets created is left');
  const cgroups = await readdir('/sys/fs/cgroup/memory').catch(() => [] as string[]);
  assert.ok(!cgroups.some((c) => c.startsWith('berth-kube-')), 'no cgroup left');
  await assert.rejects(readFile(join(KUBE_STATE, 'ready')), 'the state dir is gone');
});

async function baseImage(): Promise<string> {
  const { baseImageRecipe, baseImageTag } = await import('../src/image/index.js');
  return baseImageTag(await baseImageRecipe(join(tmpdir(), 'berth-kube-image-cache')));
}

async function firstExit(runtime: KubernetesRuntime, installId: string) {
  const abort = new AbortController();
  try {
    for await (const e of runtime.events(installId, abort.signal)) if (e.type === 'exit') return e;
  } finally {
    abort.abort();
  }
  throw new Error('event stream ended');
}
