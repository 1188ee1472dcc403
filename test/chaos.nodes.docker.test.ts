/**
 * The reduced chaos run on nodes: three nodes, each its own network namespace, Docker engine,
 * disk and worker, sharing a throw-away PostgreSQL database and a bucket of a real radosgw;
 * 12 sessions x 3 turns, docker kills of random sandboxes every 2-5 s, and 30 % of the nodes (one) killed
 * whole a third into the run (worker, engine and containers SIGKILLed at once, mounts
 * dropped, disk deleted), coming back empty. Every invariant must hold, the three of the
 * workspace chains (read from the store and the blob store alone) among them; no request
 * may fail; the node kill must hit running turns; and nothing of the nodes may be left:
 * no engine or other process, network namespace, cgroup or mount. The data dir (store
 * logs, the nodes' logs) is kept when the test fails.
 */
import assert from 'node:assert/strict';
import { readdir, rm } from 'node:fs/promises';
import { test } from 'node:test';
import { readdirIfPresent, readProcIfAlive, runChaos } from '../src/chaos/index.js';
import { listMounts } from '../src/workspace/index.js';
import { assertRunHeld } from './helpers/chaos-report.js';
import { freshDatabase } from './helpers/postgres.js';
import { testS3 } from './helpers/s3.js';

const runId = process.pid.toString(36);

/** `pid: cmdline` of every process whose command line names `dir`. */
async function processesNaming(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    const cmdline = ((await readProcIfAlive(`/proc/${pid}/cmdline`)) ?? '').split('\0').join(' ');
    if (cmdline.includes(dir)) found.push(`${pid}: ${cmdline}`);
  }
  return found;
}

test('chaos on nodes: a third of the nodes killed whole, with sandbox kills, loses, duplicates and leaks nothing', {
  timeout: 900_000,
}, async (t) => {
  const s3 = await testS3();
  await s3.createBucket('berth-chaos-nodes');
  const report = await runChaos({
    sessions: 12,
    turns: 3,
    durationCapMs: 780_000,
    // Often enough that some kill finds a running turn in a short run (most sandboxes are idle, warm ones).
    killEveryMs: { min: 2000, max: 5000 },
    killWorkers: 0,
    store: { url: await freshDatabase() },
    blobs: { service: s3, bucket: 'berth-chaos-nodes' },
    nodes: { count: 3, kill: 1 },
    // Every session may run at once: the node kill (a lookup of the busiest node, then a freeze)
    // meets up to four running turns of a few hundred ms each, not two (with two it missed them
    // all in two of three runs).
    slotsPerWorker: 4,
    // A shared, busy 2-core machine: a 3 s lease lapses under load, and the kill must be told from that.
    lease: '10s',
    keep: true,
  });
  const where = assertRunHeld(t, report);
  assert.equal(report.requests.ok, 36);
  assert.equal(report.acknowledgedLost, 0);
  assert.equal(report.duplicateReplies, 0);
  assert.equal(report.userVisibleErrors, 0);
  for (const name of ['chain-objects-present', 'workspace-from-chain', 'never-behind'])
    assert.ok(
      report.invariants.some((i) => i.name === name && i.passed),
      `${name} was checked and held`,
    );
  assert.equal(report.faults['node-kill'], 1, 'one node was killed');
  assert.equal(report.timing['node-kill'].hit, 1, `the node kill ended running turns ${where}`);
  assert.ok(report.timing['node-kill'].recoverMs, 'and their sessions committed again');
  assert.ok(report.nodes?.killed[0]?.restartedMs, 'the node came back empty');

  const dir = report.settings.dataDir;
  assert.deepEqual(await readdir(`${dir}/nodes`), [], 'every node disk is gone');
  assert.deepEqual(
    (await listMounts()).filter((m) => m.mountPoint.startsWith(`${dir}/`)).map((m) => m.mountPoint),
    [],
    'no mount under the run',
  );
  assert.deepEqual(await processesNaming(dir), [], 'no engine, containerd, shim or worker of the run');
  const namespaces = (await readdirIfPresent('/run/netns')).filter((n) => n.startsWith(`berth-${runId}-`));
  assert.deepEqual(namespaces, [], 'no network namespace of the run');
  for (const hierarchy of await readdir('/sys/fs/cgroup')) {
    const left = (await readdirIfPresent(`/sys/fs/cgroup/${hierarchy}`)).filter((g) =>
      g.startsWith(`berth-${runId}-n`),
    );
    assert.deepEqual(left, [], `no cgroup of the run in ${hierarchy}`);
  }
  await rm(dir, { recursive: true, force: true });
});
