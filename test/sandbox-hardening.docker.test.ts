/**
 * Every always-on hardening flag of a real sandbox, read back with `docker inspect`, and
 * label-scoped listing: an install sees only its own sandboxes.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileBlobStore } from '../src/blobs/index.js';
import { loadConfig } from '../src/core/index.js';
import { resolveImage } from '../src/host/index.js';
import { connectDocker, DockerRuntime, stageRunner } from '../src/runtime/index.js';
import { Workspaces } from '../src/workspace/index.js';
import { testSandboxSpec } from './helpers/sandbox-spec.js';

test('a sandbox carries every hardening flag and only its install sees it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-harden-'));
  const config = loadConfig({ BERTH_DATA: dir });
  const docker = connectDocker(config.dockerSocket);
  const runtime = new DockerRuntime(docker, config.dockerSocket);
  const image = await resolveImage(docker, config);
  const runnerDir = await stageRunner(join(dir, 'runner'));
  const workspaces = new Workspaces(dir, 1000, new FileBlobStore(join(dir, 'blobs')));
  await workspaces.prepare();
  const spec = (install: string, session: string) =>
    testSandboxSpec({ image, dir, runnerDir, workspaces }, install, session);
  const mine = await runtime.create(await spec('hardentest', 's1'));
  const theirs = await runtime.create(await spec('otherinstall', 's1'));
  t.after(async () => {
    await runtime.kill(mine);
    await runtime.kill(theirs);
    await workspaces.release();
    await rm(dir, { recursive: true, force: true });
  });

  const info = await docker.getContainer(mine.id).inspect();
  const h = info.HostConfig;
  assert.equal(h.NetworkMode, 'none');
  assert.equal(h.ReadonlyRootfs, true);
  assert.deepEqual(Object.keys(h.Tmpfs ?? {}), ['/tmp']);
  assert.deepEqual(h.CapDrop, ['ALL']);
  assert.deepEqual(h.CapAdd ?? [], []);
  assert.ok(h.SecurityOpt?.includes('no-new-privileges'));
  assert.equal(h.Init, true);
  assert.equal(h.PidsLimit, 64);
  assert.equal(h.Memory, 300 * 1024 * 1024);
  assert.equal(h.MemorySwap, 300 * 1024 * 1024, 'no swap beyond the memory limit');
  assert.equal(h.NanoCpus, 0.5e9);
  assert.deepEqual(h.Ulimits, [{ Name: 'fsize', Soft: 100 * 2 ** 20, Hard: 100 * 2 ** 20 }]);
  assert.equal(h.Privileged, false);
  assert.equal(info.Config.User, '1000:1000');
  assert.equal(info.Config.Labels['berth.install'], 'hardentest');
  assert.equal(info.Config.Labels['berth.session'], 's1');
  assert.equal(info.Config.Labels['berth.generation'], '1');
  const mounts = Object.fromEntries(
    info.Mounts.map((m) => [m.Destination, `${m.RW ? 'rw' : 'ro'} ${m.Propagation}`]),
  );
  assert.deepEqual(mounts, {
    '/opt/berth': 'ro rprivate',
    '/run/berth': 'ro rprivate',
    '/workspace': 'rw rslave',
  });

  const listed = await runtime.list('hardentest');
  assert.deepEqual(
    listed.map((c) => c.id),
    [mine.id],
  );

  await runtime.kill(mine);
  await runtime.kill(mine); // idempotent
  assert.deepEqual(await runtime.list('hardentest'), []);
  assert.equal((await runtime.list('otherinstall')).length, 1, "another install's sandbox is untouched");
});
