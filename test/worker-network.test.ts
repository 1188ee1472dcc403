/**
 * The partition of `berth chaos --partition-worker` on real kernel objects: a worker's
 * network namespace reaches the store's address through its veth and the store relay;
 * cutting the link stops that, healing it brings it back; leftovers of a dead run are
 * reaped; and the flag's bad input fails with one line. Needs root (CI runs as root).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import { startStoreRelay } from '../src/chaos/store-relay.js';
import {
  createWorkerNetworks,
  reapStaleNetworks,
  removeWorkerNetworks,
  type WorkerNetwork,
} from '../src/chaos/worker-network.js';
import { berth } from './helpers/processes.js';

const run = promisify(execFile);
const asRoot = process.getuid?.() === 0;
const NEEDS_ROOT =
  'needs root: network namespaces and veth links (ip from iproute2: scripts/ensure-iproute2.sh)';

/** Connects from inside the namespace to host:port; resolves with the bytes read, or 'failed' within 5 s (a SYN lost to a link coming up is sent again after 1 s, then 3 s). */
async function fetchFromInside(net: WorkerNetwork, host: string, port: number): Promise<string> {
  const script = `const s=require('net').connect(${port},'${host}');let d='';s.on('data',c=>d+=c);s.on('end',()=>{console.log(d);process.exit(0)});s.on('error',()=>{console.log('failed');process.exit(0)});setTimeout(()=>{console.log('failed');process.exit(0)},5000)`;
  const { stdout } = await run('nsenter', [`--net=${net.path}`, '--', process.execPath, '-e', script]);
  return stdout.trim();
}

test('a worker in its namespace reaches the store through its link and relay; a cut link partitions it, a heal restores it', {
  skip: !asRoot && NEEDS_ROOT,
}, async () => {
  // A stand-in for PostgreSQL on loopback: answers each connection with one word.
  const store = createServer((s) => s.end('store'));
  store.listen(0, '127.0.0.1');
  await once(store, 'listening');
  const storePort = (store.address() as { port: number }).port;
  const [net] = await createWorkerNetworks(1);
  after(async () => {
    await removeWorkerNetworks([net!.name]);
    store.close();
  });
  const relay = await startStoreRelay(`postgres://berth@127.0.0.1:${storePort}/db`, net!.hostAddress);
  after(() => relay.close());
  const relayed = new URL(relay.url);
  assert.equal(relayed.hostname, net!.hostAddress);
  assert.equal(relayed.pathname, '/db');

  // Loopback inside the namespace is its own: the store is not there.
  assert.equal(await fetchFromInside(net!, '127.0.0.1', storePort), 'failed');
  assert.equal(await fetchFromInside(net!, net!.hostAddress, Number(relayed.port)), 'store');
  await net!.cut();
  assert.equal(await fetchFromInside(net!, net!.hostAddress, Number(relayed.port)), 'failed');
  await net!.heal();
  assert.equal(await fetchFromInside(net!, net!.hostAddress, Number(relayed.port)), 'store');
});

test('namespaces and host links of a run whose process is gone are reaped; a live run is left alone', {
  skip: !asRoot && NEEDS_ROOT,
}, async () => {
  // A pid that cannot be alive: above the kernel's pid_max limit (2^22).
  const deadRun = (2 ** 22 + 7).toString(36);
  const stale = `berth-${deadRun}-w1`;
  await run('ip', ['netns', 'add', stale]);
  await run('ip', ['link', 'add', `bh${deadRun}w2`, 'type', 'veth', 'peer', 'name', `bn${deadRun}w2`]);
  const [mine] = await createWorkerNetworks(1);
  after(() => removeWorkerNetworks([stale, mine!.name]));
  await reapStaleNetworks();
  const namespaces = (await run('ip', ['netns', 'list'])).stdout;
  assert.ok(!namespaces.includes(stale), namespaces);
  assert.ok(namespaces.includes(mine!.name), namespaces);
  const links = (await run('ip', ['-o', 'link', 'show'])).stdout;
  assert.ok(!links.includes(`bh${deadRun}w2`), links);
});

test('berth chaos --partition-worker without a store: one line naming the flag and the fix, exit 2', async () => {
  const r = await berth(['chaos', '--partition-worker'], process.env);
  assert.equal(r.code, 2, r.stderr);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0]!, /--partition-worker .*--store.*Fix: /);
});

test('berth chaos --partition-worker where ip is missing: one line naming ip and iproute2, exit 2', {
  skip: !asRoot && 'needs root: --partition-worker checks for root before it looks for ip',
}, async () => {
  const r = await berth(['chaos', '--store', 'postgres', '--partition-worker'], {
    ...process.env,
    PATH: '/nonexistent',
  });
  assert.equal(r.code, 2, r.stderr);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0]!, /--partition-worker: ip not found: install it .*iproute2.*Fix: /);
});
