/**
 * A chaos node's control group: every process of the node lives under one cgroup named
 * `berth-<run>-n<i>` (the run id of netns.ts). Its engine and its worker join the freezer
 * hierarchy's group as they start (`joinArgv`), and the engine puts its containers in
 * child groups of it in every hierarchy (its `cgroup-parent`), so the node's whole process
 * tree — worker, dockerd, containerd, shims, the containers' processes — is one subtree.
 * That makes a machine's death exact: the subtree is frozen (nothing of the node runs a
 * step more), every process in it SIGKILLed, then thawed, so they all die at one instant.
 *
 * Invariants:
 * - cgroup v1 with the freezer controller (what this machine and Docker's cgroupfs driver
 *   use); `requireFreezer` fails with one line otherwise.
 * - `remove` deletes the group and its children in every hierarchy, deepest first, once
 *   their processes are gone; it never throws. `reapStaleCgroups` kills the processes of
 *   dead runs' groups and removes them.
 */
import { access, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sleep } from '../core/index.js';
import { isStaleRun, ownRunId } from './netns.js';

const ROOT = '/sys/fs/cgroup';
const FREEZER = join(ROOT, 'freezer');
const NAME = /^berth-([0-9a-z]+)-n\d+$/;
const SETTLE_MS = 10_000;
/**
 * A task in an uninterruptible wait (disk I/O on a busy machine) holds the group in
 * FREEZING: after this, the kill goes ahead anyway (SIGKILL reaches such a task when its
 * wait ends), so the node dies at once rather than when the slowest task freezes.
 */
const FREEZE_WAIT_MS = 1000;

/** The run id of the chaos node whose group a cgroup path (a line of /proc/<pid>/cgroup) is under, or null. */
export function nodeRunIn(cgroupPath: string): string | null {
  for (const part of cgroupPath.split('/')) {
    const run = NAME.exec(part)?.[1];
    if (run !== undefined) return run;
  }
  return null;
}

/** Fails with one line when there is no cgroup v1 freezer to kill a node with. */
export async function requireFreezer(): Promise<void> {
  await access(join(FREEZER, 'cgroup.procs')).catch(() => {
    throw new Error(
      `no cgroup v1 freezer at ${FREEZER}: berth chaos --nodes kills a node by freezing its cgroup (cgroup v2 hosts are not supported)`,
    );
  });
}

export class NodeCgroup {
  /** `berth-<run>-n<index>`: also the engine's cgroup parent. */
  readonly name: string;

  constructor(index: number) {
    this.name = `berth-${ownRunId()}-n${index}`;
  }

  /** The argv prefix that runs a command inside the group (a fixed script; the paths are its arguments). */
  joinArgv(): string[] {
    return ['sh', '-c', 'echo $$ > "$0" && exec "$@"', join(FREEZER, this.name, 'cgroup.procs')];
  }

  async create(): Promise<void> {
    await mkdir(join(FREEZER, this.name), { recursive: true });
  }

  /** The processes in the group itself: the node's own (engine, worker), not its containers'. */
  async hostPids(): Promise<number[]> {
    return pidsIn(join(FREEZER, this.name));
  }

  /** Freeze, SIGKILL every process, thaw: the whole node dies at one instant. Resolves once none is left (bounded). */
  async killAll(): Promise<void> {
    await killFrozen(join(FREEZER, this.name));
  }

  /** The group and its children in every hierarchy, deepest first; never throws. */
  async remove(): Promise<void> {
    await removeGroup(this.name);
  }
}

/** Kills the processes of dead runs' node groups and removes the groups. */
export async function reapStaleCgroups(): Promise<void> {
  const names = (await readdir(FREEZER).catch(() => [] as string[])).filter((n) =>
    isStaleRun(NAME.exec(n)?.[1]),
  );
  for (const name of names) {
    await killFrozen(join(FREEZER, name));
    await removeGroup(name);
  }
}

async function killFrozen(group: string): Promise<void> {
  const state = join(group, 'freezer.state');
  const frozenBy = Date.now() + FREEZE_WAIT_MS;
  try {
    await writeFile(state, 'FROZEN');
    while ((await readFile(state, 'utf8')).trim() !== 'FROZEN' && Date.now() < frozenBy) await sleep(10);
    for (const pid of await pidsUnder(group)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  } finally {
    await writeFile(state, 'THAWED').catch(() => undefined);
  }
  const deadline = Date.now() + SETTLE_MS;
  while ((await pidsUnder(group)).length > 0 && Date.now() < deadline) await sleep(20);
}

async function pidsIn(group: string): Promise<number[]> {
  const text = await readFile(join(group, 'cgroup.procs'), 'utf8').catch(() => '');
  return text.split('\n').filter(Boolean).map(Number);
}

async function pidsUnder(group: string): Promise<number[]> {
  const pids = await pidsIn(group);
  for (const d of await readdir(group, { withFileTypes: true }).catch(() => []))
    if (d.isDirectory()) pids.push(...(await pidsUnder(join(group, d.name))));
  return pids;
}

async function removeGroup(name: string): Promise<void> {
  for (const hierarchy of await readdir(ROOT).catch(() => [] as string[])) {
    const group = join(ROOT, hierarchy, name);
    await removeTree(group);
  }
}

async function removeTree(dir: string): Promise<void> {
  for (const d of await readdir(dir, { withFileTypes: true }).catch(() => []))
    if (d.isDirectory()) await removeTree(join(dir, d.name));
  await rmdir(dir).catch(() => undefined);
}
