/**
 * The network of a throw-away database cluster (patroni-cluster.ts): each member in a
 * network namespace of its own, so that cutting a member off is a real partition (its
 * link goes down: its peers, etcd and berth get no answer and no reset, as when a machine
 * vanishes), plus one "switch" namespace holding a bridge that joins the members, etcd
 * (which runs inside it) and the host (through one veth), all on one /24.
 *
 * Traffic between members never passes the host's own network stack: the host's firewall
 * (Docker sets iptables FORWARD to DROP) and its sysctls are not touched. The host
 * reaches every member directly on the /24 through its veth.
 *
 * Invariants:
 * - Names carry the run id (netns.ts): `berth-<run>-pgs` (switch), `berth-<run>-pg<i>`
 *   (members); links `bp<run>…`. `reapStaleClusterNetworks` kills the processes of dead
 *   runs' namespaces and deletes them.
 * - The /24 is in 198.18.0.0/15 (reserved for network tests), chosen from the pid and
 *   skipped when an address of it is already on the host.
 * - `remove` SIGKILLs every process left in the namespaces, then deletes them (their
 *   veths go with them); it never throws.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  carrierUp,
  ip,
  isStaleRun,
  killNamespaceProcesses,
  listNamespaces,
  NETNS_DIR,
  ownRunId,
} from './netns.js';

const run = promisify(execFile);

const NAMESPACE = /^berth-([0-9a-z]+)-pg(s|\d+)$/;
const BLOCKS = 512;

export interface MemberNetwork {
  /** The namespace's name (`ip netns`). */
  namespace: string;
  /** `nsenter --net=<path>` runs a process inside. */
  path: string;
  /** The member's address: where its PostgreSQL and Patroni listen. */
  address: string;
  /** Takes its link down: nothing reaches it or leaves it. */
  cut(): Promise<void>;
  heal(): Promise<void>;
  /**
   * Limits what reaches it to `kbitPerSecond` (a token bucket on its bridge port; this
   * kernel has no netem delay): a standby fed WAL slower than the primary writes lags
   * behind. null lifts the limit.
   */
  throttle(kbitPerSecond: number | null): Promise<void>;
}

export interface ClusterNetwork {
  /** The switch namespace (etcd runs in it) and its address on the /24. */
  switchPath: string;
  switchAddress: string;
  /** The host's address on the /24. */
  hostAddress: string;
  members: MemberNetwork[];
  /** Kills what still runs in the namespaces and deletes them; never throws. */
  remove(): Promise<void>;
}

export async function createClusterNetwork(memberCount: number): Promise<ClusterNetwork> {
  const run = ownRunId();
  const prefix = await freePrefix();
  const switchNs = `berth-${run}-pgs`;
  const namespaces = [switchNs];
  const remove = async () => {
    for (const name of namespaces.reverse()) {
      await killNamespaceProcesses(name);
      await ip(['netns', 'delete', name]).catch(() => undefined);
    }
    await ip(['link', 'delete', `bp${run}h`]).catch(() => undefined);
  };
  try {
    await ip(['netns', 'add', switchNs]);
    const inSwitch = (args: string[]) => ip(['-n', switchNs, ...args]);
    await inSwitch(['link', 'set', 'lo', 'up']);
    await inSwitch(['link', 'add', 'br0', 'type', 'bridge']);
    await inSwitch(['addr', 'add', `${prefix}.2/24`, 'dev', 'br0']);
    await inSwitch(['link', 'set', 'br0', 'up']);
    // The host's leg: its end keeps the host's namespace, the other end joins the bridge.
    await ip(['link', 'add', `bp${run}h`, 'type', 'veth', 'peer', 'name', `bp${run}x`, 'netns', switchNs]);
    await inSwitch(['link', 'set', `bp${run}x`, 'master', 'br0', 'up']);
    await ip(['addr', 'add', `${prefix}.1/24`, 'dev', `bp${run}h`]);
    await ip(['link', 'set', `bp${run}h`, 'up']);
    await carrierUp(`bp${run}h`);
    const members: MemberNetwork[] = [];
    for (let i = 1; i <= memberCount; i++) {
      const namespace = `berth-${run}-pg${i}`;
      const port = `bp${run}p${i}`;
      const address = `${prefix}.${10 + i}`;
      await ip(['netns', 'add', namespace]);
      namespaces.push(namespace);
      await inSwitch(['link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', namespace]);
      await inSwitch(['link', 'set', port, 'master', 'br0', 'up']);
      await ip(['-n', namespace, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
      await ip(['-n', namespace, 'link', 'set', 'eth0', 'up']);
      await ip(['-n', namespace, 'link', 'set', 'lo', 'up']);
      await carrierUp(port, switchNs);
      members.push({
        namespace,
        path: `${NETNS_DIR}/${namespace}`,
        address,
        cut: () => inSwitch(['link', 'set', port, 'down']).then(() => undefined),
        heal: async () => {
          await inSwitch(['link', 'set', port, 'up']);
          // What either side asked for while cut is cached as unreachable: a heal is a working link at once.
          await ip(['-n', namespace, 'neigh', 'flush', 'dev', 'eth0']);
          await ip(['neigh', 'flush', 'to', address]);
          for (const other of namespaces.filter((n) => n !== namespace))
            await ip(['-n', other, 'neigh', 'flush', 'to', address]);
          await carrierUp(port, switchNs);
        },
        throttle: async (kbit) => {
          await tc(switchNs, ['qdisc', 'del', 'dev', port, 'root']).catch(() => undefined);
          if (kbit !== null)
            await tc(switchNs, [
              'qdisc',
              'add',
              'dev',
              port,
              'root',
              'tbf',
              'rate',
              `${kbit}kbit`,
              'burst',
              '16kb',
              'limit',
              '4mb',
            ]);
        },
      });
    }
    return {
      switchPath: `${NETNS_DIR}/${switchNs}`,
      switchAddress: `${prefix}.2`,
      hostAddress: `${prefix}.1`,
      members,
      remove,
    };
  } catch (err) {
    await remove();
    throw err;
  }
}

async function tc(namespace: string, args: string[]): Promise<void> {
  try {
    await run('ip', ['netns', 'exec', namespace, 'tc', ...args]);
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? '').trim();
    throw new Error(`tc ${args.join(' ')} failed: ${stderr || (err as Error).message}`);
  }
}

/** Kills the processes of dead runs' cluster namespaces and deletes them (and their host links). */
export async function reapStaleClusterNetworks(): Promise<void> {
  const stale = (await listNamespaces()).filter((name) => isStaleRun(NAMESPACE.exec(name)?.[1]));
  for (const name of stale) {
    await killNamespaceProcesses(name);
    await ip(['netns', 'delete', name]).catch(() => undefined);
  }
  const links = (await ip(['-o', 'link', 'show']).catch(() => ''))
    .split('\n')
    .map((line) => /^\d+:\s+([^:@\s]+)/.exec(line)?.[1] ?? '')
    .filter((name) => isStaleRun(/^bp([0-9a-z]+)h$/.exec(name)?.[1]));
  for (const link of links) await ip(['link', 'delete', link]).catch(() => undefined);
}

/** `198.18.x.y` (the /24's first three octets) from the pid, the first one no address of the host is in. */
async function freePrefix(): Promise<string> {
  const used = await ip(['-o', '-4', 'addr', 'show']).catch(() => '');
  for (let k = 0; k < BLOCKS; k++) {
    const block = (process.pid + k) % BLOCKS;
    const prefix = `198.${18 + (block >> 8)}.${block & 255}`;
    if (!used.includes(` ${prefix}.`)) return prefix;
  }
  throw new Error('no free /24 in 198.18.0.0/15 for a database cluster network');
}
