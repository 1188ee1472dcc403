/**
 * One node of a chaos run on nodes (--nodes): a machine of its own on this one.
 *  - its network: a namespace joined to the host by a veth (worker-network.ts); the store
 *    and the S3 service are reached only through relays on the host end of its link;
 *  - its Docker engine (node-engine.ts), in that namespace, the sandbox image copied in;
 *  - its disk: <run>/nodes/n<i>/, berth's data dir `data/` and the engine's `engine/`;
 *  - its worker, `berth worker` on that data dir and engine, in that namespace;
 *  - one cgroup holding all of it (node-cgroup.ts).
 *
 * `kill` is a machine's death: worker, engine, containerd, shims and the containers'
 * processes SIGKILLed at one instant (the cgroup frozen first), then what a reboot would
 * drop is dropped (every mount under the disk: the dead worker's slots and overlays, the
 * engine's layers), the engine's shim sockets removed, the disk deleted and the cgroups
 * removed. `start` again brings the node back empty: a new engine (the image copied again)
 * and a new worker on an empty data dir, as a replacement machine joins.
 *
 * Invariants: every process of the node is in its cgroup; its network (namespace, relays)
 * outlives a kill; `remove` leaves nothing of it behind and never throws.
 */
import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type Dockerode from 'dockerode';
import { installIdOf } from '../core/index.js';
import { listMounts } from '../workspace/index.js';
import { BerthProcess } from './children.js';
import { NodeCgroup } from './node-cgroup.js';
import { copyImage, type NodeEngine, shimSockets, startNodeEngine } from './node-engine.js';
import type { WorkerNetwork } from './worker-network.js';

const run = promisify(execFile);
const ENGINE_STOP_GRACE_MS = 30_000;
/** Mount points per umount call. */
const UMOUNT_BATCH = 64;

export interface ChaosNodeOptions {
  index: number;
  /** The run's data dir: the node's disk is under nodes/, its logs beside the API's. */
  runDir: string;
  network: WorkerNetwork;
  hostDocker: Dockerode;
  /** The sandbox image, copied from the host's engine into the node's. */
  image: string;
  workerArgs: string[];
  /** The worker's environment, less what is the node's own (data dir, engine socket). */
  env: NodeJS.ProcessEnv;
}

/** What a node's start cost: its engine answering, then the image copied in. */
export interface NodeStart {
  engineMs: number;
  imageMs: number;
}

export class ChaosNode {
  readonly name: string;
  /** The node's disk. */
  readonly dir: string;
  /** berth's data dir on it. */
  readonly dataDir: string;
  readonly installId: string;
  readonly worker: BerthProcess;
  readonly cgroup: NodeCgroup;
  private engine: NodeEngine | null = null;
  readonly starts: NodeStart[] = [];

  constructor(private readonly o: ChaosNodeOptions) {
    this.name = `n${o.index}`;
    this.dir = join(o.runDir, 'nodes', this.name);
    this.dataDir = join(this.dir, 'data');
    this.installId = installIdOf(this.dataDir);
    this.cgroup = new NodeCgroup(o.index);
    this.worker = new BerthProcess(
      `${this.name}-worker`,
      o.workerArgs,
      { ...o.env, BERTH_DATA: this.dataDir, BERTH_DOCKER_SOCKET: this.socket },
      join(o.runDir, `${this.name}-worker.log`),
      { netnsPath: o.network.path, cgroup: this.cgroup },
    );
  }

  get socket(): string {
    return join(this.dir, 'engine', 'docker.sock');
  }

  /** The node's engine while it is up; null between a kill and the next start. */
  get docker(): Dockerode | null {
    return this.engine?.docker ?? null;
  }

  get network(): WorkerNetwork {
    return this.o.network;
  }

  /** An empty disk, the engine up with the image in it. The worker is started by the caller. */
  async start(): Promise<void> {
    const startedAt = performance.now();
    await mkdir(this.dataDir, { recursive: true });
    await this.cgroup.create();
    this.engine = await startNodeEngine({
      dir: join(this.dir, 'engine'),
      cgroup: this.cgroup,
      netnsPath: this.o.network.path,
      logFile: join(this.o.runDir, `${this.name}-dockerd.log`),
    });
    const engineUp = performance.now();
    await copyImage(this.o.hostDocker, this.engine.docker, this.o.image);
    this.starts.push({
      engineMs: Math.round(engineUp - startedAt),
      imageMs: Math.round(performance.now() - engineUp),
    });
  }

  /** The machine dies: everything of it at once. Resolves once all of it is dead (its children reaped). */
  async kill(): Promise<void> {
    const engine = this.engine;
    this.engine = null;
    await this.cgroup.killAll();
    await Promise.all([this.worker.waitForExit(10_000), engine?.waitForExit(10_000)]);
  }

  /** What a reboot drops and a dead disk loses: its mounts, the engine's shim sockets, the disk, the cgroups. */
  async wipe(): Promise<void> {
    const mounts = (await listMounts())
      .map((m) => m.mountPoint)
      .filter((p) => p.startsWith(`${this.dir}/`))
      .sort((a, b) => b.length - a.length);
    // One umount for many (deepest first): one process per mount took 90 s for a busy node under load.
    for (let i = 0; i < mounts.length; i += UMOUNT_BATCH)
      await run('umount', ['-l', ...mounts.slice(i, i + UMOUNT_BATCH)]).catch(() => undefined);
    for (const socket of await shimSockets(join(this.dir, 'engine'))) await rm(socket, { force: true });
    await rm(this.dir, { recursive: true, force: true });
    await this.cgroup.remove();
  }

  /** End of the run: the worker was stopped by the run; the engine stops its containers, then all is removed. */
  async remove(): Promise<void> {
    const engine = this.engine;
    this.engine = null;
    if (engine && !(await engine.stop(ENGINE_STOP_GRACE_MS).catch(() => false)))
      process.stderr.write(`berth chaos: the ${this.name} engine ignored SIGTERM; killed\n`);
    await this.cgroup.killAll().catch(() => undefined);
    await this.wipe().catch(() => undefined);
  }

  /** pids of the node's own processes but its worker: the engine's (dockerd, containerd, shims). */
  async enginePids(): Promise<number[]> {
    const worker = this.worker.pid;
    return (await this.cgroup.hostPids()).filter((pid) => pid !== worker);
  }
}
