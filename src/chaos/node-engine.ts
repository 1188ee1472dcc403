/**
 * A chaos node's own Docker engine, started the way scripts/kubernetes/start.sh starts the
 * test cluster's: dockerd with its own config, data-root, exec-root, socket, pidfile and
 * cgroup parent, no bridge and no iptables, here inside the node's network namespace and
 * cgroup. The sandbox image is copied in from the host's engine through the Engine API
 * (save, then load: no rebuild).
 *
 * Invariants:
 * - Everything it writes is under its dir, except its cgroups (node-cgroup.ts) and the
 *   shim sockets containerd keeps in /run/containerd/s: `shimSockets` names a dead
 *   engine's, so a killed node's clean-up removes them.
 * - `stop` ends it cleanly (SIGTERM: it stops its containers and its containerd) or
 *   reports that it did not within the grace; start-up and every wait are bounded.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { sleep } from '../core/index.js';
import type { NodeCgroup } from './node-cgroup.js';

const READY_TIMEOUT_MS = 60_000;
/** Where containerd (1.6) keeps each shim's socket: sha256 of "<its socket>/<namespace>/<container>". */
const SHIM_SOCKET_DIR = '/run/containerd/s';

export interface NodeEngine {
  readonly socket: string;
  readonly docker: Dockerode;
  readonly pid: number;
  /** SIGTERM, then wait; true once it exited within `graceMs`. */
  stop(graceMs: number): Promise<boolean>;
  /** Resolves once dockerd has exited and been reaped (it is this process's child), or after `timeoutMs`. */
  waitForExit(timeoutMs: number): Promise<void>;
}

export interface NodeEngineOptions {
  /** The engine's dir on the node's disk. */
  dir: string;
  cgroup: NodeCgroup;
  /** `nsenter --net=` target: the node's network namespace. */
  netnsPath: string;
  logFile: string;
}

export async function startNodeEngine(o: NodeEngineOptions): Promise<NodeEngine> {
  const socket = join(o.dir, 'docker.sock');
  const config = join(o.dir, 'daemon.json');
  await mkdir(o.dir, { recursive: true });
  await writeFile(
    config,
    JSON.stringify({
      bridge: 'none',
      iptables: false,
      'ip-masq': false,
      'ip-forward': false,
      'exec-opts': ['native.cgroupdriver=cgroupfs'],
      'cgroup-parent': `/${o.cgroup.name}`,
      'storage-driver': 'overlay2',
      'log-driver': 'json-file',
      'live-restore': false,
    }),
  );
  const argv = [
    ...o.cgroup.joinArgv(),
    'nsenter',
    `--net=${o.netnsPath}`,
    '--',
    'dockerd',
    '--config-file',
    config,
    '--data-root',
    join(o.dir, 'root'),
    '--exec-root',
    execRootOf(o.dir),
    '--pidfile',
    join(o.dir, 'dockerd.pid'),
    '-H',
    `unix://${socket}`,
  ];
  const log = openSync(o.logFile, 'a');
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', log, log] });
  closeSync(log);
  child.on('error', () => undefined); // a failed spawn shows as an exited process
  const exited = new Promise<boolean>((resolve) => child.once('exit', () => resolve(true)));
  const docker = new Dockerode({ socketPath: socket });
  await waitReady(docker, child, o.logFile);
  const exitWithin = (ms: number) => Promise.race([exited, sleep(ms).then(() => false)]);
  return {
    socket,
    docker,
    pid: child.pid!,
    stop: async (graceMs) => {
      if (!running(child)) return true;
      child.kill('SIGTERM');
      return exitWithin(graceMs);
    },
    waitForExit: async (timeoutMs) => {
      await exitWithin(timeoutMs);
    },
  };
}

/** The image `tag` of the host's engine, saved and loaded into `to`. */
export async function copyImage(from: Dockerode, to: Dockerode, tag: string): Promise<void> {
  const saved = await from.getImage(tag).get();
  await new Promise<void>((resolve, reject) =>
    to.loadImage(saved, (err: Error | null, stream?: NodeJS.ReadableStream) => {
      if (err || !stream) reject(err ?? new Error(`loading ${tag} returned no stream`));
      else to.modem.followProgress(stream, (e: Error | null) => (e ? reject(e) : resolve()));
    }),
  );
}

/** The shim sockets a dead engine under `dir` left in /run/containerd/s, one per container it knew. */
export async function shimSockets(dir: string): Promise<string[]> {
  const containerd = join(execRootOf(dir), 'containerd', 'containerd.sock');
  const ids = await readdir(join(dir, 'root', 'containers')).catch(() => [] as string[]);
  return ids.map((id) =>
    join(SHIM_SOCKET_DIR, createHash('sha256').update(`${containerd}/moby/${id}`).digest('hex')),
  );
}

function execRootOf(dir: string): string {
  return join(dir, 'exec');
}

async function waitReady(docker: Dockerode, child: ChildProcess, logFile: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (!running(child))
      throw new Error(
        `dockerd exited at start (${child.exitCode ?? child.signalCode}): ${await tail(logFile)}`,
      );
    if (
      await docker.ping().then(
        () => true,
        () => false,
      )
    )
      return;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`dockerd did not answer within ${READY_TIMEOUT_MS} ms: ${await tail(logFile)}`);
    }
    await sleep(100);
  }
}

function running(child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null;
}

async function tail(file: string): Promise<string> {
  return (await readFile(file, 'utf8').catch(() => '')).split('\n').slice(-5).join('\n');
}
