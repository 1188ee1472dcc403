/**
 * The few mount operations the workspace needs. The per-turn ones (overlay mount,
 * unmount) go through this process's syscall helper; mount(8)/umount(8) (argv arrays) are
 * the fallback and do the rare ones. Reading /proc/self/mountinfo tells what is mounted.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import {
  EINVAL,
  ENOENT,
  MNT_DETACH,
  MS_NODEV,
  MS_NOSUID,
  mountHelper,
  SyscallError,
} from './mount-syscalls.js';

const run = promisify(execFile);

export interface MountEntry {
  mountPoint: string;
  /** Propagation tags of the mount, e.g. ['shared:12']. */
  optional: string[];
  fsType: string;
}

/** /proc/self/mountinfo, decoded (octal escapes such as \040 for space). */
export async function listMounts(): Promise<MountEntry[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [left, right = ''] = line.split(' - ');
      const fields = left!.split(' ');
      return {
        mountPoint: unescapeMountPath(fields[4]!),
        optional: fields.slice(6),
        fsType: right.split(' ')[0] ?? '',
      };
    });
}

function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)));
}

export async function isMountPoint(path: string): Promise<boolean> {
  return (await listMounts()).some((m) => m.mountPoint === path);
}

export async function mountOverlay(
  target: string,
  layers: { lower: string; upper: string; work: string },
): Promise<void> {
  // nosuid, nodev: a setuid binary or device node planted in a workspace gives nothing, even without no-new-privileges.
  const data = `lowerdir=${layers.lower},upperdir=${layers.upper},workdir=${layers.work}`;
  const helper = mountHelper();
  if (helper)
    await helper.call(
      ['M', 'overlay', target, 'overlay', String(MS_NOSUID | MS_NODEV), data],
      `mount overlay on ${target}`,
    );
  else await run('mount', ['-t', 'overlay', 'overlay', '-o', `nosuid,nodev,${data}`, target]);
}

/** A directory bind-mounted onto itself and marked rshared, so mounts made below it later reach containers (rslave). */
export async function makeSharedMountRoot(path: string): Promise<void> {
  const mounts = await listMounts();
  const own = mounts.filter((m) => m.mountPoint === path).at(-1);
  if (!own) await run('mount', ['--bind', path, path]);
  if (!own?.optional.some((o) => o.startsWith('shared:'))) await run('mount', ['--make-rshared', path]);
}

/** Unmounts every mount at `path` (stacked ones too). Lazy as a last resort: the processes that used it are dead. */
export async function unmountAll(path: string): Promise<void> {
  const helper = mountHelper();
  if (helper) return unmountAllBySyscall(helper, path);
  for (let i = 0; i < 8 && (await isMountPoint(path)); i++) {
    try {
      await run('umount', [path]);
    } catch {
      await run('umount', ['-l', path]);
    }
  }
}

/** umount2 until EINVAL (or ENOENT) says `path` is no mount point (any more): no mountinfo read needed. */
async function unmountAllBySyscall(helper: NonNullable<ReturnType<typeof mountHelper>>, path: string) {
  const nothingMounted = (err: unknown) =>
    err instanceof SyscallError && (err.errno === EINVAL || err.errno === ENOENT);
  for (let i = 0; i < 8; i++) {
    try {
      await helper.call(['U', path, '0'], `umount ${path}`);
    } catch (err) {
      if (nothingMounted(err)) return;
      if (!(err instanceof SyscallError)) throw err;
      await helper.call(['U', path, String(MNT_DETACH)], `umount -l ${path}`).catch((e: unknown) => {
        if (!nothingMounted(e)) throw e;
      });
    }
  }
}
