/**
 * Several "machines" on this one: an API host (`berth up --slots 0`) and `berth worker`
 * processes, each with a data dir of its own (its disk), sharing one PostgreSQL store and
 * one bucket of a real S3 service. A machine is destroyed the way one dies: its worker
 * SIGKILLed, its sandboxes killed, its disk wiped (mounts and all).
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { promisify } from 'node:util';
import { type BlobStore, openBlobStore } from '../../src/blobs/index.js';
import { ApiClient } from '../../src/cli/index.js';
import { blobsConfigOf, loadConfig } from '../../src/core/index.js';
import { connectDocker } from '../../src/runtime/index.js';
import { readAdminToken } from '../../src/secrets/index.js';
import { openStore, type Store } from '../../src/store/index.js';
import { freshDatabase } from './postgres.js';
import { eventually, exited, freePort, spawnBerth, waitForHealthy, wipeDataDir } from './processes.js';
import { freshBucket, testS3 } from './s3.js';

const run = promisify(execFile);

export interface Machine {
  name: string;
  dataDir: string;
  child: ChildProcess;
  /** The worker's id in the store, once it registered. */
  workerId(): Promise<string>;
}

export async function startMachines(t: TestContext, o: { leaseMs?: number; env?: NodeJS.ProcessEnv } = {}) {
  const leaseMs = o.leaseMs ?? 2000;
  const s3 = await testS3();
  const bucket = await freshBucket();
  const storeUrl = await freshDatabase();
  const apiDir = await mkdtemp(join(tmpdir(), 'berth-machines-api-'));
  const port = await freePort();
  const shared = {
    ...process.env,
    BERTH_PORT: String(port),
    BERTH_LEASE: `${leaseMs}ms`,
    BERTH_STORE: storeUrl,
    BERTH_BLOBS: `s3://${bucket.bucket}/install`,
    ...s3.env(),
    ...o.env,
  };
  const children: ChildProcess[] = [];
  const dirs: string[] = [apiDir];
  const api = spawnBerth(['up', '--slots', '0'], { ...shared, BERTH_DATA: apiDir }, apiDir, 'api.log');
  children.push(api);
  await waitForHealthy(`http://127.0.0.1:${port}`, api, join(apiDir, 'api.log'));
  const store: Store = await openStore({
    store: storeUrl,
    sqlitePath: '',
    leaseMs,
    retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 },
  });
  const url = `http://127.0.0.1:${port}`;
  const token = (await readAdminToken(apiDir)) ?? undefined;
  const client = new ApiClient(url, token);
  t.after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    await Promise.all(children.map(exited));
    await store.close();
    for (const dir of dirs) await wipeDataDir(dir);
  });

  /** A machine with an empty disk; its worker joins the cluster. */
  const addMachine = async (name: string, env: NodeJS.ProcessEnv = {}): Promise<Machine> => {
    const dataDir = await mkdtemp(join(tmpdir(), `berth-machine-${name}-`));
    dirs.push(dataDir);
    const child = spawnBerth(
      ['worker', '--slots', '1'],
      { ...shared, BERTH_DATA: dataDir, ...env },
      dataDir,
      'worker.log',
    );
    children.push(child);
    const workerId = async () =>
      eventually(
        `worker of machine ${name} registered`,
        async () => (await store.listWorkers()).find((w) => w.pid === child.pid)?.id,
        // A worker opens the store and the bucket, proves overlayfs and stages its runner
        // first: tens of seconds on two cores that other suites keep busy.
        90_000,
      );
    await workerId();
    return { name, dataDir, child, workerId };
  };

  /** The machine dies: its worker SIGKILLed, its sandboxes killed, its data dir gone. */
  const destroy = async (m: Machine): Promise<void> => {
    const workerId = await m.workerId();
    m.child.kill('SIGKILL');
    await exited(m.child);
    const docker = connectDocker('/var/run/docker.sock');
    const containers = await docker.listContainers({
      all: true,
      filters: { label: [`berth.worker=${workerId}`] },
    });
    for (const c of containers) await docker.getContainer(c.Id).remove({ force: true });
    await wipeDataDir(m.dataDir);
  };

  /** The install's blob store as its workers open it, for a test to look into. */
  const openBlobs = async (): Promise<BlobStore> => {
    const blobs = await openBlobStore(blobsConfigOf(loadConfig(shared)));
    t.after(() => blobs.close());
    return blobs;
  };

  return { url, token, client, store, openBlobs, addMachine, destroy };
}

/** The berth CLI against the machines' API: its exit code, stdout and stderr. */
export async function berthCli(cluster: { url: string; token?: string | undefined }, args: string[]) {
  const env = { ...process.env, BERTH_URL: cluster.url, BERTH_TOKEN: cluster.token ?? '' };
  try {
    const { stdout, stderr } = await run(process.execPath, ['bin/berth.js', ...args], { env });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
