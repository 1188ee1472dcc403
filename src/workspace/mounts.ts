/**
 * The few mount operations the workspace needs, through mount(8)/umount(8) with argv
 * arrays (Node has no mount syscall). Reading /proc/self/mountinfo tells what is mounted.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';

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
  await run('mount', [
    '-t',
    'overlay',
    'overlay',
    '-o',
    // nosuid, nodev: a setuid binary or device node planted in a workspace gives nothing, even without no-new-privileges.
    `nosuid,nodev,lowerdir=${layers.lower},upperdir=${layers.upper},workdir=${layers.work}`,
    target,
  ]);
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
  for (let i = 0; i < 8 && (await isMountPoint(path)); i++) {
    try {
      await run('umount', [path]);
    } catch {
      await run('umount', ['-l', path]);
    }
  }
}
