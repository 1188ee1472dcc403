/**
 * A chaos node dies the way a machine does, and comes back empty: its worker's place, its
 * own Docker engine, a container with a bind mount from its disk; killed, every process of
 * it (engine, containerd, shim, the container's) is gone at once; wiped, no mount, shim
 * socket, cgroup or file of it is left; started again, its engine holds the image and no
 * container; removed, not even its network namespace remains.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { access, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { NodeSet, readProcIfAlive } from '../src/chaos/index.js';
import { ensureBaseImage } from '../src/image/index.js';
import { connectDocker } from '../src/runtime/index.js';
import { listMounts } from '../src/workspace/index.js';

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );
/** Running: it has a /proc entry and is not a zombie (dead, its exit status not yet collected by its parent). */
const alive = async (pid: number) => {
  const stat = await readProcIfAlive(`/proc/${pid}/stat`);
  return stat !== null && /^\d+ \(.*\) ([A-Za-z])/s.exec(stat)?.[1] !== 'Z';
};
const mountsUnder = async (dir: string) =>
  (await listMounts()).filter((m) => m.mountPoint.startsWith(`${dir}/`)).map((m) => m.mountPoint);
const cgroupsNamed = async (name: string) =>
  (await readdir('/sys/fs/cgroup')).map((hierarchy) => join('/sys/fs/cgroup', hierarchy, name));

test('a node killed whole leaves nothing of itself, and comes back empty', {
  timeout: 600_000,
}, async (t) => {
  const hostDocker = connectDocker('/var/run/docker.sock');
  const runDir = await mkdtemp(join(tmpdir(), 'berth-node-test-'));
  const { tag } = await ensureBaseImage(hostDocker, { cacheDir: join(runDir, 'cache') });
  const set = await NodeSet.start({
    count: 1,
    runDir,
    hostDocker,
    image: tag,
    // Only relays are made to these: no worker is started here.
    storeUrl: 'postgres://berth@127.0.0.1:9/none',
    s3Endpoint: 'http://127.0.0.1:9',
    workerArgs: ['worker'],
    env: process.env,
  });
  let removed = false;
  // The nodes first (their engines, mounts and cgroups), then their dir.
  t.after(async () => {
    if (!removed) await set.remove();
    await rm(runDir, { recursive: true, force: true });
  });
  const [node] = set.nodes;
  const docker = node!.docker!;
  const shared = join(node!.dataDir, 'shared');
  await mkdir(shared, { recursive: true });
  const container = await docker.createContainer({
    Image: tag,
    Cmd: ['sleep', '600'],
    HostConfig: { NetworkMode: 'none', Binds: [`${shared}:/shared`] },
  });
  await container.start();
  const containerPid = (await container.inspect()).State.Pid;
  const shimSocket = join(
    '/run/containerd/s',
    createHash('sha256')
      .update(`${node!.dir}/engine/exec/containerd/containerd.sock/moby/${container.id}`)
      .digest('hex'),
  );
  const enginePids = await node!.enginePids();
  assert.ok(enginePids.length >= 3, `dockerd, containerd and a shim run in the node's cgroup: ${enginePids}`);
  assert.ok(await exists(shimSocket), 'the container has its shim socket');
  assert.ok((await mountsUnder(node!.dir)).length > 0, 'the engine has mounts on the disk');

  await node!.kill();
  for (const pid of [containerPid, ...enginePids])
    assert.equal(await alive(pid), false, `pid ${pid} is dead`);
  assert.equal(node!.docker, null, 'no engine while the node is dead');

  await node!.wipe();
  assert.deepEqual(await mountsUnder(node!.dir), [], 'no mount left on the disk');
  assert.equal(await exists(node!.dir), false, 'the disk is gone');
  assert.equal(await exists(shimSocket), false, 'the shim socket is gone');
  for (const group of await cgroupsNamed(node!.cgroup.name))
    assert.equal(await exists(group), false, `${group} is gone`);

  await node!.start();
  const again = node!.docker!;
  assert.deepEqual(await again.listContainers({ all: true }), [], 'no container on the new engine');
  assert.ok(await again.getImage(tag).inspect(), 'the image was copied in again');
  assert.deepEqual(await readdir(node!.dataDir), [], 'an empty data dir');

  removed = true;
  await set.remove();
  assert.equal(await exists(node!.dir), false);
  assert.deepEqual(await mountsUnder(runDir), []);
  for (const group of await cgroupsNamed(node!.cgroup.name)) assert.equal(await exists(group), false);
  assert.equal(await exists(node!.network.path), false, 'the network namespace is gone');
});
