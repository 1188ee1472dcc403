/**
 * The nodes of a chaos run on nodes (--nodes N) and what the run does with them together:
 * start them (each its network, relays to the shared store and S3 service, engine and image;
 * the workers are started by the run, one at a time like any worker), list their live
 * engines for the sandbox kills, look at every node's disk and engine for leftovers after
 * the run (a node whose engine is down fails that look), and remove them all.
 *
 * Invariants:
 * - Nodes share nothing but the store and the S3 service, each reached through a relay on
 *   the host end of the node's own link: a node's worker cannot reach the host's loopback.
 * - `remove` stops every engine, drops every disk, cgroup, relay and namespace; it never
 *   throws. Namespaces and cgroups of dead earlier runs are reaped at start.
 */
import type Dockerode from 'dockerode';
import { ChaosNode } from './chaos-node.js';
import type { BerthProcess } from './children.js';
import type { KillableNode, SandboxEngine } from './fault-records.js';
import type { InvariantResult } from './invariant-result.js';
import { reapStaleCgroups, requireFreezer } from './node-cgroup.js';
import { NodeUsageSampler } from './node-usage.js';
import { type Machine, orphans } from './orphans.js';
import { type StoreRelay, startStoreRelay, startTcpRelay } from './store-relay.js';
import {
  createWorkerNetworks,
  reapStaleNetworks,
  removeWorkerNetworks,
  requireNetworkNamespaces,
  type WorkerNetwork,
} from './worker-network.js';

export interface NodeSetOptions {
  count: number;
  runDir: string;
  hostDocker: Dockerode;
  image: string;
  /** The shared PostgreSQL store (postgres://). */
  storeUrl: string;
  /** The shared S3 service's endpoint (http://host:port); the children's env carries its keys. */
  s3Endpoint: string;
  workerArgs: string[];
  /** The children's environment (BERTH_BLOBS, AWS keys, lease, log level). */
  env: NodeJS.ProcessEnv;
}

export class NodeSet {
  private constructor(
    readonly nodes: ChaosNode[],
    private readonly networks: WorkerNetwork[],
    private readonly relays: { close(): Promise<void> }[],
  ) {}

  static async start(o: NodeSetOptions): Promise<NodeSet> {
    await requireNetworkNamespaces();
    await requireFreezer();
    await reapStaleNetworks();
    await reapStaleCgroups();
    const networks = await createWorkerNetworks(o.count);
    const relays: { close(): Promise<void> }[] = [];
    const set = new NodeSet([], networks, relays);
    try {
      const s3 = new URL(o.s3Endpoint);
      for (const [i, network] of networks.entries()) {
        const store: StoreRelay = await startStoreRelay(o.storeUrl, network.hostAddress);
        relays.push(store);
        const blobs = await startTcpRelay({ host: s3.hostname, port: Number(s3.port) }, network.hostAddress);
        relays.push(blobs);
        const endpoint = `http://${network.hostAddress}:${blobs.port}`;
        set.nodes.push(
          new ChaosNode({
            index: i + 1,
            runDir: o.runDir,
            network,
            hostDocker: o.hostDocker,
            image: o.image,
            workerArgs: o.workerArgs,
            env: {
              ...o.env,
              BERTH_STORE: store.url,
              BERTH_IMAGE: o.image,
              AWS_ENDPOINT_URL_S3: endpoint,
              AWS_ENDPOINT_URL: endpoint,
            },
          }),
        );
      }
      await Promise.all(set.nodes.map((n) => n.start()));
      return set;
    } catch (err) {
      await set.remove();
      throw err;
    }
  }

  get workers(): BerthProcess[] {
    return this.nodes.map((n) => n.worker);
  }

  /** The engines that are up now (a killed node's is gone until it starts again). */
  engines(): SandboxEngine[] {
    return this.nodes.flatMap((n) => (n.docker ? [{ docker: n.docker, installId: n.installId }] : []));
  }

  /**
   * The nodes as the fault injector kills them. A node is back once its worker registered
   * (`registered` resolves): not while its worker is still starting.
   */
  killable(worker: {
    workerId(w: BerthProcess): string | null;
    registered(w: BerthProcess): Promise<void>;
  }): KillableNode[] {
    return this.nodes.map((n) => ({
      name: n.name,
      workerId: () => worker.workerId(n.worker),
      kill: () => n.kill(),
      wipe: () => n.wipe(),
      restart: async () => {
        await n.start();
        n.worker.start();
        await worker.registered(n.worker);
      },
    }));
  }

  usageSampler(): NodeUsageSampler {
    return new NodeUsageSampler(this.nodes.map((n) => () => n.enginePids()));
  }

  /**
   * The no-orphan checks (orphans.ts) on every machine: the API host's data dir and engine,
   * and each node's data dir and engine, a node whose engine is down included (which fails
   * them); one result per kind, the details named by machine.
   */
  orphans(api: Omit<Machine, 'workerDirs'>): Promise<InvariantResult[]> {
    return orphans([
      // No worker runs on the API's machine: its slots, workspaces and run dirs may never be made.
      { ...api, workerDirs: 'may-be-absent' },
      ...this.nodes.map((n) => ({
        name: n.name,
        dataDir: n.dataDir,
        installId: n.installId,
        docker: n.docker,
        workerDirs: 'required' as const,
      })),
    ]);
  }

  /** Every engine stopped, every disk, cgroup, relay and namespace removed; never throws. */
  async remove(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.remove()));
    await Promise.all(this.relays.map((r) => r.close().catch(() => undefined)));
    await removeWorkerNetworks(this.networks.map((n) => n.name));
  }
}
