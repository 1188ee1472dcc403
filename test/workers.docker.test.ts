/**
 * Several worker processes sharing one store (a SQLite file, or a PostgreSQL database),
 * killed the way workers die (SIGKILL): the survivor takes the session over under a new
 * generation and cleans up what the dead one left; a worker killed between a turn's
 * store commit and its promotion has the promotion finished by the next worker.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { ApiClient } from '../src/cli/index.js';
import type { ScriptPlan } from '../src/core/index.js';
import { installIdOf } from '../src/core/index.js';
import { connectDocker } from '../src/runtime/index.js';
import { readAdminToken } from '../src/secrets/index.js';
import { openStore, type Store } from '../src/store/index.js';
import { listMounts } from '../src/workspace/index.js';
import { failpointEnv } from './helpers/failpoint-preload.js';
import { freshDatabase } from './helpers/postgres.js';
import { eventually, exited, freePort, spawnBerth, waitForHealthy } from './helpers/processes.js';

const plan = (p: ScriptPlan) => JSON.stringify(p);

type StoreKind = 'sqlite' | 'postgres';

/** `berth up --slots 0` (API only) plus the given workers, on one data dir and one store, with a 2 s lease. */
async function startCluster(t: TestContext, kind: StoreKind, workers: Record<string, NodeJS.ProcessEnv>) {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-workers-'));
  const port = await freePort();
  const storeUrl = kind === 'postgres' ? await freshDatabase() : '';
  const env = {
    ...process.env,
    BERTH_DATA: dataDir,
    BERTH_PORT: String(port),
    BERTH_LEASE: '2s',
    BERTH_STORE: storeUrl,
  };
  const children: ChildProcess[] = [];
  const api = spawnBerth(['up', '--slots', '0'], env, dataDir, 'api.log');
  children.push(api);
  await waitForHealthy(`http://127.0.0.1:${port}`, api, join(dataDir, 'api.log'));
  const store: Store = await openStore({
    store: storeUrl,
    sqlitePath: join(dataDir, 'berth.db'),
    leaseMs: 2000,
    retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 },
  });
  t.after(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    await Promise.all(children.map(exited));
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  const spawned: Record<string, ChildProcess> = {};
  for (const [name, extra] of Object.entries(workers)) {
    spawned[name] = spawnBerth(['worker', '--slots', '2'], { ...env, ...extra }, dataDir, `${name}.log`);
    children.push(spawned[name]);
  }
  await eventually('workers registered', async () =>
    (await store.listWorkers()).length === Object.keys(workers).length + 1 ? true : undefined,
  );
  const client = new ApiClient(`http://127.0.0.1:${port}`, (await readAdminToken(dataDir)) ?? undefined);
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  /** A worker that joins later; stopped with the others. */
  const addWorker = (name: string) => {
    const child = spawnBerth(['worker', '--slots', '1'], env, dataDir, `${name}.log`);
    children.push(child);
    return child;
  };
  return { dataDir, store, client, workers: spawned, addWorker, installId: installIdOf(dataDir) };
}

for (const kind of ['sqlite', 'postgres'] as const)
  test(`${kind}: SIGKILL of the worker running a turn: another worker takes over, the reply arrives, nothing is left behind`, async (t) => {
    const { dataDir, store, client, workers, installId } = await startCluster(t, kind, { b: {}, c: {} });
    await client.request('POST', '/v1/sessions/s1/messages', {
      agent: 'scr',
      text: plan({
        steps: [{ append: { path: 'log.txt', content: 'x\n' } }, { sleep: 4000 }],
        reply: 'done',
      }),
    });
    const running = await eventually('turn running', async () =>
      (await store.listTurns('s1')).find((x) => x.status === 'running'),
    );
    const victimRow = (await store.listWorkers()).find((w) => w.id === running.workerId)!;
    const victim = Object.values(workers).find((w) => w.pid === victimRow.pid)!;
    victim.kill('SIGKILL');

    const turns = await eventually('reply after takeover', async () => {
      const all = await store.listTurns('s1');
      return all.some((x) => x.status === 'committed') ? all : undefined;
    });
    assert.equal(turns[0]?.status, 'aborted');
    assert.equal(turns[0]?.errorCode, 'LEASE_EXPIRED');
    assert.notEqual(turns.at(-1)?.workerId, running.workerId);
    assert.ok(turns.at(-1)!.generation > running.generation);
    assert.equal((await store.listMessages('s1', 0, 10))[0]?.tries, 2);
    await eventually('promoted', async () =>
      (await store.getSessionView('s1', Date.now()))?.pendingLayer ? undefined : true,
    );
    assert.equal(
      await readFile(join(dataDir, 'workspaces', 's1', 'committed', 'log.txt'), 'utf8'),
      'x\n',
      'written once',
    );

    // The survivor's sweep removes the dead worker's container, slot mount and dir, run dir and attempt layer.
    const docker = connectDocker('/var/run/docker.sock');
    const sandbox = `berth-${installId}-s1-g${running.generation}`;
    await eventually('dead worker cleaned up', async () => {
      const containers = await docker.listContainers({
        all: true,
        filters: { label: [`berth.worker=${running.workerId}`] },
      });
      const mounts = (await listMounts()).filter((m) =>
        m.mountPoint.startsWith(join(dataDir, 'slots', sandbox)),
      );
      const layers = await readdir(join(dataDir, 'workspaces', 's1', 'layers'));
      const files = [...(await readdir(join(dataDir, 'slots'))), ...(await readdir(join(dataDir, 'run')))];
      return containers.length === 0 &&
        mounts.length === 0 &&
        !layers.includes(running.id) &&
        !files.includes(sandbox)
        ? true
        : undefined;
    });
  });

test('a worker killed between a turn’s store commit and its promotion: the next worker finishes the promotion', async (t) => {
  const { dataDir, store, client, addWorker } = await startCluster(t, 'sqlite', {
    b: failpointEnv('before-promote'),
  });
  await client.request('POST', '/v1/sessions/p1/messages', {
    agent: 'scr',
    text: plan({ steps: [{ write: { path: 'out.txt', content: 'committed\n' } }], reply: 'done' }),
  });
  const view = await eventually('committed, not promoted', async () => {
    const v = await store.getSessionView('p1', Date.now());
    return v?.pendingLayer ? v : undefined;
  });
  assert.equal(view.workspaceVersion, 1);
  await assert.rejects(readFile(join(dataDir, 'workspaces', 'p1', 'committed', 'out.txt')), /ENOENT/);

  // A healthy worker joins; once the dead one's lease lapsed its sweep promotes the sealed layer.
  addWorker('c');
  await eventually('promoted by the survivor', async () =>
    (await store.getSessionView('p1', Date.now()))?.pendingLayer ? undefined : true,
  );
  assert.equal(
    await readFile(join(dataDir, 'workspaces', 'p1', 'committed', 'out.txt'), 'utf8'),
    'committed\n',
  );

  const next = await client.request<{ eventId: number }>('POST', '/v1/sessions/p1/messages', {
    text: plan({ steps: [{ assertFile: { path: 'out.txt', equals: 'committed\n' } }], reply: 'saw it' }),
  });
  for await (const e of client.events('p1', next.eventId, AbortSignal.timeout(30_000))) {
    if (e.type === 'failed') assert.fail(JSON.stringify(e.data));
    if (e.type === 'reply') break;
  }
});
