/**
 * Freezing a Docker sandbox: every process stopped where it stands, so a capture reads its
 * files as of one instant (docs/checkpoints.md). Two ways, chosen per container:
 *
 *   runc    the container's own freezer cgroup, written directly: cgroup v1
 *           `freezer.state` (FROZEN/THAWED), cgroup v2 `cgroup.freeze` (1/0, done when
 *           `cgroup.events` says `frozen 1`). Found through /proc/<pid>/cgroup of its init,
 *           so the cgroupfs and systemd drivers both work. About 2 ms, against 10–40 ms for
 *           the Engine API's pause on this kind of machine.
 *   runsc   the Engine API's pause, which asks gVisor's sentry to stop its tasks (`runsc
 *           pause`, ~50–100 ms). A cgroup freeze of a gVisor sandbox is wrong twice: under
 *           the ptrace platform the group stays FREEZING for seconds, and a frozen sentry
 *           cannot answer `runsc kill`, so a stop hangs until someone thaws it.
 *
 * Also the Engine API's pause when the cgroup cannot be reached (a worker in a container of
 * its own, whose /proc and /sys/fs/cgroup are not the host's).
 *
 * Invariant: the engine's view and the cgroup's agree on who froze it: `thaw` unpauses what
 * the engine paused and writes the cgroup of what it did not, so a sandbox frozen either way
 * (by a worker that died before it thawed, say) is thawed by any later caller.
 */
import { readFile, writeFile } from 'node:fs/promises';
import type Dockerode from 'dockerode';
import { BerthError, sleep } from '../../core/index.js';

const CGROUP_ROOT = '/sys/fs/cgroup';
/** A task in an uninterruptible wait (disk I/O) holds a group in FREEZING; past this the freeze fails. */
const FREEZE_WAIT_MS = 2000;

type Freezer =
  | { kind: 'cgroup-v1'; state: string }
  | { kind: 'cgroup-v2'; freeze: string; events: string }
  | { kind: 'engine' };

/** A container and how it is frozen: what a thaw needs, kept by the freezer so it asks the engine nothing while frozen. */
export interface FreezeTarget {
  container: Dockerode.Container;
  paused: boolean;
  freezer: Freezer;
}

/** Frozen when it resolves; the target to hand `thawContainer`. */
export async function freezeContainer(docker: Dockerode, idOrName: string): Promise<FreezeTarget> {
  const target = await resolve(docker, idOrName);
  const { freezer } = target;
  if (target.paused) return target;
  try {
    switch (freezer.kind) {
      case 'engine':
        await target.container.pause();
        return { ...target, paused: true };
      case 'cgroup-v1':
        await writeFile(freezer.state, 'FROZEN');
        await until(async () => (await readFile(freezer.state, 'utf8')).trim() === 'FROZEN');
        return target;
      case 'cgroup-v2':
        await writeFile(freezer.freeze, '1');
        await until(async () => /^frozen 1$/m.test(await readFile(freezer.events, 'utf8')));
        return target;
    }
  } catch (err) {
    await thawTarget(target).catch(() => undefined);
    throw new BerthError('SANDBOX_FAILED', `Sandbox ${idOrName} not frozen: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** Idempotent: a sandbox not frozen is left as it is. `frozen`: what its freeze returned, if this process froze it. */
export async function thawContainer(
  docker: Dockerode,
  idOrName: string,
  frozen?: FreezeTarget,
): Promise<void> {
  await thawTarget(frozen ?? (await resolve(docker, idOrName)));
}

async function thawTarget(target: FreezeTarget): Promise<void> {
  const { freezer } = target;
  if (target.paused) await target.container.unpause();
  else if (freezer.kind === 'cgroup-v1') await writeCgroup(freezer.state, 'THAWED');
  else if (freezer.kind === 'cgroup-v2') await writeCgroup(freezer.freeze, '0');
}

/** A cgroup gone with its container has nothing left to thaw. */
async function writeCgroup(file: string, value: string): Promise<void> {
  await writeFile(file, value).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
}

async function resolve(docker: Dockerode, idOrName: string): Promise<FreezeTarget> {
  const container = docker.getContainer(idOrName);
  const info = await container.inspect();
  const paused = info.State.Paused;
  if (info.HostConfig.Runtime === 'runsc' || !info.State.Pid) return { container, paused, freezer: ENGINE };
  return { container, paused, freezer: await cgroupFreezer(info.State.Pid) };
}

const ENGINE: Freezer = { kind: 'engine' };

/** The freezer of a process's cgroup: v1's freezer hierarchy when mounted (hybrid hosts too), else v2's. */
async function cgroupFreezer(pid: number): Promise<Freezer> {
  const lines = await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '');
  const freezer = cgroupFreezerOf(lines);
  if (!freezer) return ENGINE;
  // Reachable only when this process sees the host's cgroup tree.
  const probe = freezer.kind === 'cgroup-v1' ? freezer.state : freezer.freeze;
  return (await readFile(probe, 'utf8').then(
    () => true,
    () => false,
  ))
    ? freezer
    : ENGINE;
}

/** From the text of /proc/<pid>/cgroup: where its freezer's files are, or null. */
export function cgroupFreezerOf(procCgroup: string): Exclude<Freezer, { kind: 'engine' }> | null {
  const entries = procCgroup
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      // hierarchy-id:controllers:path, the path itself free to hold colons
      const first = line.indexOf(':');
      const second = line.indexOf(':', first + 1);
      return { controllers: line.slice(first + 1, second).split(','), path: line.slice(second + 1) };
    });
  const v1 = entries.find((e) => e.controllers.includes('freezer'));
  if (v1) return { kind: 'cgroup-v1', state: `${CGROUP_ROOT}/freezer${v1.path}/freezer.state` };
  const v2 = entries.find((e) => e.controllers.length === 1 && e.controllers[0] === '');
  if (v2 && v2.path !== '/')
    return {
      kind: 'cgroup-v2',
      freeze: `${CGROUP_ROOT}${v2.path}/cgroup.freeze`,
      events: `${CGROUP_ROOT}${v2.path}/cgroup.events`,
    };
  return null;
}

async function until(done: () => Promise<boolean>): Promise<void> {
  const by = Date.now() + FREEZE_WAIT_MS;
  while (!(await done())) {
    if (Date.now() > by) throw new Error(`still freezing after ${FREEZE_WAIT_MS} ms`);
    await sleep(1);
  }
}
