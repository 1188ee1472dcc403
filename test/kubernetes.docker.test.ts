/**
 * The kubernetes runtime against a real cluster built offline (scripts/kubernetes/): the
 * runtime conformance cases of the Docker runtime (hardening, exit detection, kill,
 * label-scoped listing and reaping, bind, commit), messages end to end through Pods (cold
 * and from the warm pool), a gVisor Pod verified to run under runsc, Pods deleted mid-turn,
 * deploy/kubernetes/ accepted by the API server and run on both nodes (a session's workspace
 * moving between nodes through the blob store, and surviving the loss of a node and its
 * disk), and a stack stop that leaves nothing behind.
 */
import assert from 'node:assert/strict';
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { KubeConfig, KubernetesObjectApi, type V1Secret } from '@kubernetes/client-node';
import { FileBlobStore } from '../src/blobs/index.js';
import { readdirIfPresent } from '../src/chaos/index.js';
import type { ScriptPlan } from '../src/core/index.js';
import { installIdOf } from '../src/core/index.js';
import { type KubernetesRuntime, podName, stageRunner } from '../src/runtime/index.js';
import { Workspaces } from '../src/workspace/index.js';
import {
  patchNode,
  publishedManifests,
  RBAC_KINDS,
  sharedHostDir,
  testWorkerDaemonSet,
} from './helpers/kube-deploy.js';
import {
  KUBE_NAMESPACE,
  KUBE_STATE,
  type KubeStack,
  runStackScript,
  startKubeStack,
} from './helpers/kube-stack.js';
import { freshDatabase } from './helpers/postgres.js';
import { eventually, wipeDataDir } from './helpers/processes.js';
import { freshBucket, testS3 } from './helpers/s3.js';
import { testSandboxSpec } from './helpers/sandbox-spec.js';
import { startTestHost, type TestHost } from './helpers/test-host.js';

const plan = (p: ScriptPlan) => JSON.stringify(p);
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
    await runtime.kill(mine);
    await runtime.kill(theirs);
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
    await runtime.kill(mine);
    await runtime.kill(mine); // idempotent
    await runtime.kill({ id: '', name: 'berth-kubetest-Sess_1-g1' }); // by name
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
    await orphanRuntime.kill(orphan);
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

test('deploy/kubernetes: the API server accepts every manifest', { skip: SKIP }, async () => {
  const manifests = await publishedManifests();
  assert.ok(manifests.length >= 10, `${manifests.length} objects`);
  // Each object as published, validated by the real API server (server-side dry run; 409: it exists already).
  const objects = objectsApi();
  for (const o of manifests) {
    await objects.create(o, undefined, 'All').catch((err: { code?: number; body?: unknown }) => {
      if (err.code !== 409)
        throw new Error(`${o.kind} ${o.metadata?.name}: ${err.code} ${JSON.stringify(err.body)}`);
    });
  }
});

const RUNC_NODE = 'berth-kube-runc';
const RUNSC_NODE = 'berth-kube-runsc';
/** The label deploy/kubernetes/ selects the worker DaemonSet's nodes by. */
const SANDBOX_NODE_LABEL = 'berth.dev/sandboxes';

/**
 * deploy/kubernetes/ on both nodes, for real: the DaemonSet puts a worker on each labelled
 * node, with the in-cluster service account, the store and blob-store Secrets as published,
 * its sandboxes pinned to its node, and its data dir a host dir of that node alone
 * (<disks>/<node name>: both nodes are this one machine). They share one PostgreSQL store
 * and one radosgw bucket with the API (a host process here). The gVisor node is a node pool
 * that runs gVisor Pods only (docs/kubernetes.md, the test cluster), so the session's agent
 * follows the node its next turn must run on: runc on one, runsc on the other.
 */
test('the worker DaemonSet on two nodes, one blob store: a session moves to the other node with its files; a node lost with its disk loses nothing committed', {
  skip: SKIP,
}, async (t) => {
  const s3 = await testS3();
  const blobsUrl = `s3://${(await freshBucket()).bucket}/install`;
  const storeUrl = await freshDatabase();
  // A turn lost with its node is tried again soon (the default backoff starts at a second).
  const retry = { BERTH_RETRY_BASE: '200ms' };
  const objects = objectsApi();
  const manifests = await publishedManifests();
  const disks = await sharedHostDir('berth-kube-disks-');
  const diskOf = (node: string) => join(disks.path, node);
  const runscTaints = (await stack.core.readNode({ name: RUNSC_NODE })).spec?.taints ?? [];
  const rbac = manifests.filter((o) => RBAC_KINDS.includes(o.kind!));
  const secret = (name: string, stringData: Record<string, string>): V1Secret => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: KUBE_NAMESPACE },
    stringData,
  });
  const secrets = [secret('berth-store', { url: storeUrl }), secret('berth-blobs', s3.env())];
  const image = IMAGE_ENV ?? (await baseImage());
  const daemonSet = await testWorkerDaemonSet(manifests, {
    image,
    hostDir: disks.path,
    env: {
      BERTH_DATA: `${disks.path}/$(NODE_NAME)`,
      BERTH_BLOBS: blobsUrl,
      BERTH_IDLE_TIMEOUT: '0',
      BERTH_WARM_POOL: '0',
      ...retry,
    },
  });
  // The gVisor node's taint keeps other Pods off it; a node agent tolerates it, as node pools' DaemonSets do.
  daemonSet.spec!.template.spec!.tolerations = [{ key: 'berth.dev/runtime', operator: 'Exists' }];
  const sandboxNodes = async (labelled: string[]) => {
    for (const node of [RUNC_NODE, RUNSC_NODE])
      await patchNode(stack.core, node, {
        metadata: { labels: { [SANDBOX_NODE_LABEL]: labelled.includes(node) ? 'true' : null } },
      });
  };
  // Before the API host's own hook (the last worker to stop unmounts the slots its data dir holds): the
  // workers end, then their sandboxes (each node's worker is an install of its own, its data dir's path),
  // whose Pods hold mounts of the disks; the disks go and the API host closes whatever failed before.
  let started: TestHost | undefined;
  t.after(async () => {
    try {
      for (const o of [daemonSet, ...secrets, ...rbac]) await objects.delete(o).catch(() => undefined);
      await sandboxNodes([]);
      await patchNode(stack.core, RUNSC_NODE, { spec: { taints: runscTaints } });
      await podsGone(WORKER_PODS);
      for (const node of [RUNC_NODE, RUNSC_NODE]) {
        const sandboxes = `berth.install=${installIdOf(diskOf(node))}`;
        await stack.core.deleteCollectionNamespacedPod({
          namespace: KUBE_NAMESPACE,
          labelSelector: sandboxes,
        });
        await podsGone(sandboxes);
      }
    } finally {
      await disks.remove();
      await started?.host.close();
    }
  });
  const lab = await startTestHost(t, {
    ...stack.hostEnv,
    BERTH_SLOTS: '0',
    BERTH_STORE: storeUrl,
    BERTH_BLOBS: blobsUrl,
    ...s3.env(),
    ...retry,
  });
  started = lab;
  for (const o of [...rbac, ...secrets, daemonSet]) await objects.create(o);

  const { store } = lab.host;
  const known = new Set((await store.listWorkers()).map((w) => w.id));
  /** The worker the DaemonSet starts on a node, once it registered in the store. */
  const workerJoins = (node: string) =>
    eventually(
      `the worker on ${node} registered`,
      async () => {
        if ((await workerPod(node))?.status?.phase !== 'Running') return undefined;
        const joined = (await store.listWorkers()).find((w) => !known.has(w.id));
        if (joined) known.add(joined.id);
        return joined?.id;
      },
      120_000,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}; workers: ${await workerLogs()}`);
    });
  const turn = async (p: ScriptPlan, until?: (e: { type: string }) => void) => {
    const events = await lab.sendAndCollect(
      'n1',
      { agent: 'scr', text: plan(p) },
      (e) => {
        until?.(e);
        return ['reply', 'failed'].includes(e.type);
      },
      240_000,
    );
    const last = events.at(-1)!;
    if (last.type !== 'reply') {
      const tries = (await store.listTurns('n1')).map((x) => [x.workerId, x.status, x.errorCode, x.error]);
      assert.fail(
        `the turn failed: ${JSON.stringify(last.data)}; tries ${JSON.stringify(tries)}; ${await workerLogs()}`,
      );
    }
    return String(last.data.text);
  };
  const committed = async () => (await store.listTurns('n1')).filter((x) => x.status === 'committed');
  /** The worker's own account of bringing its copy level: what the turn ran on, by the worker's log. */
  const broughtLevel = async (node: string) =>
    (await workerLog(node)).lines
      .filter((line) => line.includes('"Workspace brought level with the store"'))
      .map(
        (line) =>
          JSON.parse(line) as { sessionId: string; version: number; how: string; bytes: number; ms: number },
      );
  // What each turn checks of the files it starts from: a 3 MB file byte for byte, a link, a mode (by find:
  // this gVisor refuses coreutils' statx with EINVAL).
  const FILES_OF_TURN_1 =
    'sha256sum -c --quiet big.sha256 && test "$(readlink link)" = deep/dir/big.bin && test "$(find deep -maxdepth 0 -printf %m)" = 750';

  // Turn 1 on the runc node.
  await sandboxNodes([RUNC_NODE]);
  const onRunc = await workerJoins(RUNC_NODE);
  await lab.client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  await turn({
    steps: [
      { write: { path: 'f.txt', content: 'one\n' } },
      {
        run: 'mkdir -p deep/dir && head -c 3000000 /dev/urandom > deep/dir/big.bin && sha256sum deep/dir/big.bin > big.sha256',
      },
      { run: 'ln -s deep/dir/big.bin link && chmod 750 deep' },
      { putState: { key: 'n', value: 1 } },
    ],
    reply: 'written',
  });
  assert.equal((await committed())[0]?.workerId, onRunc, 'the runc node’s worker ran turn 1');
  assert.equal((await store.getWorkspaceChain('n1')).version, 1);

  // The runc node leaves the DaemonSet (its worker stops, its disk stays); turn 2 can only run on the gVisor node.
  await sandboxNodes([RUNC_NODE, RUNSC_NODE]);
  const onRunsc = await workerJoins(RUNSC_NODE);
  await sandboxNodes([RUNSC_NODE]);
  await podsGone(WORKER_PODS, RUNC_NODE);
  await lab.client.request('PATCH', '/v1/agents/scr', { isolation: 'runsc' });
  await turn({
    steps: [
      { assertFile: { path: 'f.txt', equals: 'one\n' } },
      { run: FILES_OF_TURN_1 },
      { assertState: { key: 'n', equals: 1 } },
      { run: 'dmesg | grep -q gVisor' },
      { run: 'rm f.txt && echo two > g.txt' },
    ],
    reply: 'moved',
  });
  assert.equal((await committed())[1]?.workerId, onRunsc, 'the gVisor node’s worker ran turn 2');
  const materialised = await broughtLevel(RUNSC_NODE);
  assert.deepEqual(
    materialised.map((l) => [l.sessionId, l.how, l.version]),
    [['n1', 'materialised', 1]],
    'an empty disk: the whole chain fetched, at the version the store held',
  );
  t.diagnostic(`materialised on ${RUNSC_NODE}: ${materialised[0]?.bytes} bytes in ${materialised[0]?.ms} ms`);
  assert.equal((await store.getWorkspaceChain('n1')).version, 2);

  // Turn 3 starts on the gVisor node, which is lost mid-turn: worker and sandboxes SIGKILLed, disk wiped. The
  // runc node comes back (its disk at version 1) and runs the turn again, on version 2.
  let lost: Promise<string> | undefined;
  let lostAt = 0;
  /** Resolves to the id of the runc node's new worker. */
  const loseRunscNode = async () => {
    lostAt = Date.now();
    await patchNode(stack.core, RUNSC_NODE, {
      spec: { taints: [...runscTaints, { key: 'berth.dev/lost', value: 'true', effect: 'NoSchedule' }] },
    });
    const engine = stack.engine('runsc');
    const running = await engine.listContainers({
      filters: { label: [`io.kubernetes.pod.namespace=${KUBE_NAMESPACE}`] },
    });
    await Promise.all(
      running.map((c) =>
        engine
          .getContainer(c.Id)
          .kill({ signal: 'SIGKILL' })
          .catch((err: { statusCode?: number }) => {
            if (err.statusCode !== 409) throw err; // it exited meanwhile
          }),
      ),
    );
    const pod = await workerPod(RUNSC_NODE);
    await stack.core.deleteNamespacedPod({
      name: pod!.metadata!.name!,
      namespace: KUBE_NAMESPACE,
      gracePeriodSeconds: 0,
    });
    await podsGone(WORKER_PODS, RUNSC_NODE);
    await wipeDataDir(diskOf(RUNSC_NODE));
    await lab.client.request('PATCH', '/v1/agents/scr', { isolation: 'runc' });
    await sandboxNodes([RUNC_NODE]);
    return workerJoins(RUNC_NODE);
  };
  assert.equal(
    await turn(
      {
        steps: [
          { assertFile: { path: 'f.txt', equals: null } },
          { assertFile: { path: 'g.txt', equals: 'two\n' } },
          { run: FILES_OF_TURN_1 },
          { assertFile: { path: 'c.txt', equals: null } },
          { write: { path: 'c.txt', content: 'three\n' } },
          { progress: 'written' },
          { sleep: 8000 },
        ],
        reply: 'survived',
      },
      (e) => {
        if (e.type === 'progress' && !lost) lost = loseRunscNode();
      },
    ),
    'survived',
  );
  t.diagnostic(`node lost mid-turn → the turn's reply from the other node: ${Date.now() - lostAt} ms`);
  const runcAgain = await lost;
  await assert.rejects(access(diskOf(RUNSC_NODE)), 'the lost node’s disk is wiped');

  // The store: three committed turns, each on the version before it; the lost attempt aborted, not committed.
  const turns = await store.listTurns('n1');
  const done = turns.filter((x) => x.status === 'committed');
  assert.deepEqual(
    done.map((x) => x.baseVersion),
    [0, 1, 2],
    'each committed turn ran on the version the store held before it',
  );
  assert.deepEqual(
    done.map((x) => x.workerId),
    [onRunc, onRunsc, runcAgain],
  );
  assert.ok(
    turns.some((x) => x.workerId === onRunsc && x.status === 'aborted'),
    `the turn in flight on the lost node was aborted: ${JSON.stringify(turns.map((x) => [x.workerId, x.status]))}`,
  );
  const caughtUp = await broughtLevel(RUNC_NODE);
  assert.deepEqual(
    caughtUp.map((l) => [l.sessionId, l.how, l.version]),
    [['n1', 'layers', 2]],
    'its disk at version 1: the one later layer applied, to the version the store held',
  );
  t.diagnostic(`brought level on ${RUNC_NODE}: ${caughtUp[0]?.bytes} bytes in ${caughtUp[0]?.ms} ms`);
  const chain = await store.getWorkspaceChain('n1');
  assert.equal(chain.version, 3);
  for (const entry of chain.entries)
    assert.ok(
      await lab.host.blobs.head(entry.key),
      `${entry.key}: named by the chain, present in the blob store`,
    );
  const replies = (await store.listMessages('n1', 0, 20)).filter((m) => m.direction === 'out');
  assert.equal(replies.length, 3, 'one reply per message');
});

function objectsApi(): KubernetesObjectApi {
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  return KubernetesObjectApi.makeApiClient(kc);
}

const WORKER_PODS = 'app.kubernetes.io/name=berth-worker';

/** The DaemonSet's worker Pod on a node (not one being deleted), if any. */
async function workerPod(node: string) {
  const pods = await stack.core.listNamespacedPod({
    namespace: KUBE_NAMESPACE,
    labelSelector: WORKER_PODS,
    fieldSelector: `spec.nodeName=${node}`,
  });
  return pods.items.find((p) => !p.metadata?.deletionTimestamp);
}

async function podsGone(labelSelector: string, node?: string): Promise<void> {
  await eventually(
    `no Pod ${labelSelector}${node ? ` on ${node}` : ''}`,
    async () => {
      const pods = await stack.core.listNamespacedPod({
        namespace: KUBE_NAMESPACE,
        labelSelector,
        ...(node ? { fieldSelector: `spec.nodeName=${node}` } : {}),
      });
      return pods.items.length === 0 ? true : undefined;
    },
    60_000,
  );
}

/**
 * The output of the newest worker container on a node, from its engine (the two kubelets share
 * /var/log/pods, so the API's Pod logs are not reliable here), and how that container ended if it did.
 */
async function workerLog(node: string): Promise<{ lines: string[]; state: string }> {
  const engine = stack.engine(node === RUNC_NODE ? 'runc' : 'runsc');
  const [last] = await engine.listContainers({
    all: true,
    filters: { label: ['io.kubernetes.container.name=worker'] },
  });
  if (!last) return { lines: [], state: 'no worker container' };
  const container = engine.getContainer(last.Id);
  const raw = (await container.logs({ stdout: true, stderr: true, follow: false })) as Buffer;
  // Docker's multiplexed stream: frames of an 8-byte header (stream, 0, 0, 0, size as uint32 BE) and the bytes.
  const chunks: Buffer[] = [];
  for (let at = 0; at + 8 <= raw.length; at += 8 + raw.readUInt32BE(at + 4))
    chunks.push(raw.subarray(at + 8, at + 8 + raw.readUInt32BE(at + 4)));
  const state = (await container.inspect()).State;
  return {
    lines: Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean),
    state: state.Running ? 'running' : `exited ${state.ExitCode} at ${state.FinishedAt}`,
  };
}

/** Both nodes' workers' last lines, for a failure's message. */
async function workerLogs(): Promise<string> {
  const tails = await Promise.all(
    [RUNC_NODE, RUNSC_NODE].map(async (node) => {
      const { lines, state } = await workerLog(node);
      return `${node} (${state}):\n${lines.slice(-30).join('\n')}`;
    }),
  );
  return tails.join('\n');
}

test('the stack stops and leaves nothing behind', {
  skip: SKIP || (KEEP && 'BERTH_KUBE_KEEP=1 keeps the stack for a look, so its clean-up is not tested'),
}, async () => {
  await runStackScript('stop.sh', stackLog);
  const mounts = await readFile('/proc/self/mountinfo', 'utf8');
  assert.ok(!mounts.includes(KUBE_STATE), 'no mount under the state dir');
  assert.deepEqual(await readSysctls(), sysctlsBefore, 'the sysctls the kubelet changed are back');
  assert.deepEqual(await existing(HOST_PATHS), hostPathsBefore, 'no host path the kubelets created is left');
  const cgroups = await readdirIfPresent('/sys/fs/cgroup/memory');
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
