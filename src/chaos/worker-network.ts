/**
 * Each worker of a partition run in a network namespace of its own, joined to the host by
 * a veth pair (a /30 per worker), so that cutting a worker off is a real partition: the
 * host end of its veth goes down and its TCP to the store stalls, as when a machine's
 * link fails. Unix sockets (Docker's, the gateways', the data dir) are file system objects
 * and keep working inside the namespace: only the network is cut.
 *
 * Invariants:
 * - Every namespace and veth is named with the run's id (the pid of the chaos process,
 *   base 36): `berth-<run>-w<i>`, `bh<run>w<i>`. `reapStaleNetworks` removes those whose
 *   run is no longer alive, so a run that died leaves nothing behind for long.
 * - `remove` deletes the namespaces (their veth ends go with them, and the host ends with
 *   the pair) and the host ends left over; it never throws.
 * - Needs root and iproute2's `ip`; `requireNetworkNamespaces` fails with the fix otherwise.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { carrierUp, ip, isStaleRun, listNamespaces, NETNS_DIR, ownRunId } from './netns.js';

const run = promisify(execFile);
const NAMESPACE = /^berth-([0-9a-z]+)-w\d+$/;
const HOST_LINK = /^bh([0-9a-z]+)w\d+$/;

export interface WorkerNetwork {
  /** The namespace's name (`ip netns`). */
  name: string;
  /** Its bind-mounted handle: `nsenter --net=<path>` runs a process inside. */
  path: string;
  /** The host end's address: what the worker inside reaches the host at. */
  hostAddress: string;
  /** Cuts the link (host end down): the worker is partitioned. */
  cut(): Promise<void>;
  /** Brings the link up again. */
  heal(): Promise<void>;
}

/** Fails with one line saying what is missing: root, `ip`, or `nsenter`. */
export async function requireNetworkNamespaces(): Promise<void> {
  if (process.getuid?.() !== 0)
    throw new Error('network namespaces need root: run berth chaos --partition-worker as root');
  for (const [tool, pkg] of [
    ['ip', 'iproute2'],
    ['nsenter', 'util-linux'],
  ] as const) {
    await run(tool, ['-V']).catch(() => {
      throw new Error(
        `${tool} not found: install it (bash scripts/ensure-iproute2.sh, or apt-get install ${pkg})`,
      );
    });
  }
}

/** One namespace + veth per worker, for the run of this process. */
export async function createWorkerNetworks(count: number): Promise<WorkerNetwork[]> {
  const runId = ownRunId();
  const networks: WorkerNetwork[] = [];
  try {
    for (let i = 1; i <= count; i++) networks.push(await createOne(runId, i));
  } catch (err) {
    await removeWorkerNetworks(networks.map((n) => n.name));
    throw err;
  }
  return networks;
}

/** Deletes these namespaces and the host ends of their veths; never throws. */
export async function removeWorkerNetworks(names: string[]): Promise<void> {
  for (const name of names) {
    await ip(['netns', 'delete', name]).catch(() => undefined);
    const link = hostLinkOf(name);
    if (link) await ip(['link', 'delete', link]).catch(() => undefined);
  }
}

/** Removes the namespaces and host veth ends of runs whose process is gone. */
export async function reapStaleNetworks(): Promise<void> {
  const namespaces = (await listNamespaces()).filter((name) => isStaleRun(NAMESPACE.exec(name)?.[1]));
  await removeWorkerNetworks(namespaces);
  const links = (await ip(['-o', 'link', 'show']).catch(() => ''))
    .split('\n')
    .map((line) => /^\d+:\s+([^:@\s]+)/.exec(line)?.[1] ?? '')
    .filter((name) => isStaleRun(HOST_LINK.exec(name)?.[1]));
  for (const link of links) await ip(['link', 'delete', link]).catch(() => undefined);
}

async function createOne(runId: string, index: number): Promise<WorkerNetwork> {
  const name = `berth-${runId}-w${index}`;
  const hostLink = `bh${runId}w${index}`;
  const innerLink = `bn${runId}w${index}`;
  const [hostAddress, innerAddress] = addressesOf(index);
  await ip(['netns', 'add', name]);
  await ip(['link', 'add', hostLink, 'type', 'veth', 'peer', 'name', innerLink, 'netns', name]);
  await ip(['addr', 'add', `${hostAddress}/30`, 'dev', hostLink]);
  await ip(['link', 'set', hostLink, 'up']);
  await ip(['-n', name, 'addr', 'add', `${innerAddress}/30`, 'dev', innerLink]);
  await ip(['-n', name, 'link', 'set', innerLink, 'up']);
  await ip(['-n', name, 'link', 'set', 'lo', 'up']);
  const carries = () => Promise.all([carrierUp(hostLink), carrierUp(innerLink, name)]);
  await carries();
  return {
    name,
    path: `${NETNS_DIR}/${name}`,
    hostAddress,
    cut: () => ip(['link', 'set', hostLink, 'down']).then(() => undefined),
    heal: async () => {
      await ip(['link', 'set', hostLink, 'up']);
      // Addresses asked for while cut are cached as unreachable for a while: a heal is a working link at once.
      await ip(['-n', name, 'neigh', 'flush', 'dev', innerLink]);
      await carries();
    },
  };
}

/**
 * 100.64.0.0/10 (shared address space, rarely a host's own network), one /30 per worker:
 * the third and fourth octets come from this process's pid, so two runs at once do not collide.
 */
function addressesOf(index: number): [host: string, inner: string] {
  const block = (process.pid % 4096) * 64 + index; // up to 63 workers per run
  const base = 100 * 2 ** 24 + 64 * 2 ** 16 + ((block * 4) % 2 ** 22);
  const dotted = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
  return [dotted(base + 1), dotted(base + 2)];
}

function hostLinkOf(namespace: string): string | null {
  const m = /^berth-([0-9a-z]+)-w(\d+)$/.exec(namespace);
  return m ? `bh${m[1]}w${m[2]}` : null;
}
