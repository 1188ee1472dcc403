/**
 * The files of a live sandbox's workspace, read and written by the worker on the host (the
 * slot's mounted view: a resident sandbox's in-place directory, or a running turn's
 * overlay), for the control endpoint's file routes. The worker is root and the workspace is
 * the sandbox's to change, so every step goes through a directory file descriptor whose
 * real path was checked to be inside the workspace (/proc/self/fd/N stands in for openat):
 * a symlink the agent planted, or swapped in mid-request, cannot lead a read, write, rename
 * or removal outside. A write lands in a temp file in the target's directory, counted
 * against the agent's workspace quota as it streams, and is renamed over the target only
 * when complete: a refused or broken write leaves nothing. What berth makes is owned by the
 * sandbox user, so the agent can change it.
 */
import { randomBytes } from 'node:crypto';
import type { Stats } from 'node:fs';
import { constants } from 'node:fs';
import {
  type FileHandle,
  lchown,
  lstat,
  mkdir,
  open,
  readdir,
  readlink,
  realpath,
  rename,
  rmdir,
  stat,
  unlink,
} from 'node:fs/promises';
import { dirname } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  type Agent,
  asDiskFull,
  BerthError,
  type SandboxFileEntry,
  workspaceSegments,
} from '../core/index.js';
import type { WorkspaceQuota, Workspaces } from '../workspace/index.js';

/** Linux O_PATH (not in Node's constants): a descriptor that names a file without opening it. */
const O_PATH = 0o10000000;
const { O_DIRECTORY, O_NOFOLLOW, O_WRONLY, O_CREAT, O_EXCL, O_RDONLY } = constants;

export interface SandboxFilesOptions {
  sessionId: string;
  /** The host directory the sandbox sees as its workspace now; throws NO_LIVE_SANDBOX when none is mounted. */
  root(): Promise<string>;
  /** Owner of what the sandbox writes (its non-root user). */
  uid: number;
  /** The agent's workspaceMb, in bytes. */
  limitBytes: number;
  /** What the session's workspace occupies now (the quota's measure). */
  usedBytes(): Promise<number>;
}

/**
 * The files of the sandbox a supervision holds: its slot, measured by the running turn's
 * quota (`quota()`), or, with none running, over the committed layer a resident sandbox writes in place.
 */
export function workspaceFilesOf(
  workspaces: Workspaces,
  sessionId: string,
  sandboxName: string,
  agent: Pick<Agent, 'workspaceMb'>,
  quota: () => WorkspaceQuota | null,
): SandboxFiles {
  const limitBytes = agent.workspaceMb * 2 ** 20;
  return new SandboxFiles({
    sessionId,
    root: async () => {
      const slot = workspaces.slotPath(sandboxName);
      // A mount point has a device of its own; a slot already gone has none.
      const [self, parent] = await Promise.all([stat(slot), stat(dirname(slot))]).catch(() => [null, null]);
      if (self && parent && self.dev !== parent.dev) return slot;
      throw new BerthError(
        'NO_LIVE_SANDBOX',
        `Session ${sessionId}'s sandbox has no workspace mounted now (between turns) (files)`,
      );
    },
    uid: workspaces.sandboxUid,
    limitBytes,
    usedBytes: async () => (quota() ?? (await workspaces.quota(sessionId, null, limitBytes))).usedBytes(),
  });
}

const fdPath = (fd: number, name?: string) =>
  name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`;

export class SandboxFiles {
  constructor(private readonly o: SandboxFilesOptions) {}

  /** A regular file's bytes (a symlink followed only inside the workspace). */
  async read(path: string): Promise<{ size: number; body: Readable }> {
    return this.inParent(path, 'read', async (dir, name, root) => {
      const target = await this.checked(await open(fdPath(dir.fd, name), O_PATH), root, path);
      try {
        const st = await target.stat();
        if (!st.isFile()) throw this.conflict(path, 'is not a regular file', 'read');
        const file = await open(fdPath(target.fd), O_RDONLY);
        return { size: st.size, body: file.createReadStream() };
      } finally {
        await target.close();
      }
    });
  }

  /** Writes `body` to the file atomically (temp file + rename), within the quota; `mkdirs` makes missing parents. */
  async write(path: string, body: Readable, mkdirs: boolean): Promise<SandboxFileEntry> {
    return this.inParent(
      path,
      'write',
      async (dir, name) => {
        const existing = await lstat(fdPath(dir.fd, name)).catch(() => null);
        if (existing?.isDirectory()) throw this.conflict(path, 'is a directory', 'write');
        const freed = existing?.isFile() ? existing.blocks * 512 : 0;
        const budget = this.o.limitBytes - (await this.o.usedBytes()) + freed;
        const temp = fdPath(dir.fd, `.berth-write-${randomBytes(6).toString('hex')}`);
        const file = await open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644);
        try {
          await file.chown(this.o.uid, this.o.uid);
          // The stream closes the file, also when the write fails.
          await pipeline(body, this.capped(budget, path), file.createWriteStream());
          await rename(temp, fdPath(dir.fd, name));
        } catch (err) {
          await unlink(temp).catch(() => undefined);
          throw asDiskFull(err, `writing ${path} into session ${this.o.sessionId}'s sandbox`);
        }
        return entryOf(name, await lstat(fdPath(dir.fd, name)));
      },
      mkdirs,
    );
  }

  /** A directory's entries, sorted by name; names that are not UTF-8 are counted in `omitted`, not listed. */
  async list(path: string): Promise<{ entries: SandboxFileEntry[]; omitted: number }> {
    const root = await this.root();
    const dir = await this.openDir(root, workspaceSegments(path), false, path);
    try {
      const names = await readdir(fdPath(dir.fd), { encoding: 'buffer' }).catch((err: unknown) => {
        throw this.fileError(err, path, 'list');
      });
      const entries: SandboxFileEntry[] = [];
      let omitted = 0;
      for (const raw of names) {
        const name = raw.toString('utf8');
        if (!Buffer.from(name, 'utf8').equals(raw)) omitted += 1;
        else {
          const st = await lstat(fdPath(dir.fd, name)).catch(() => null);
          if (st) entries.push(entryOf(name, st));
        }
      }
      entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      return { entries, omitted };
    } finally {
      await dir.close();
    }
  }

  /** The path itself (a symlink is reported as one, not followed). */
  async stat(path: string): Promise<SandboxFileEntry> {
    if (workspaceSegments(path).length === 0) return entryOf('', await stat(await this.root()));
    return this.inParent(path, 'stat', async (dir, name) => entryOf(name, await lstat(fdPath(dir.fd, name))));
  }

  /** Removes a file, a symlink (not its target), or a directory: a non-empty one only when `recursive`. */
  async remove(path: string, recursive: boolean): Promise<void> {
    await this.inParent(path, 'remove', async (dir, name) => {
      const st = await lstat(fdPath(dir.fd, name));
      if (!st.isDirectory()) return unlink(fdPath(dir.fd, name));
      return recursive ? removeTree(dir.fd, Buffer.from(name)) : rmdir(fdPath(dir.fd, name));
    });
  }

  /** Makes a directory; with `parents`, its missing parents too and an existing one is fine (mkdir -p). */
  async mkdir(path: string, parents: boolean): Promise<void> {
    const root = await this.root();
    if (parents) return (await this.openDir(root, workspaceSegments(path), true, path)).close();
    await this.inParent(path, 'mkdir', async (dir, name) => {
      await mkdir(fdPath(dir.fd, name), { mode: 0o755 });
      await lchown(fdPath(dir.fd, name), this.o.uid, this.o.uid);
    });
  }

  /** Moves `from` to `to` (replacing a file there, as rename(2) does). */
  async rename(from: string, to: string): Promise<void> {
    await this.inParent(from, 'rename', (fromDir, fromName) =>
      this.inParent(to, 'rename', (toDir, toName) =>
        rename(fdPath(fromDir.fd, fromName), fdPath(toDir.fd, toName)),
      ),
    );
  }

  /**
   * Runs `op` with the checked parent directory of `path` and its last name (the root
   * itself is no operation's target here); errno failures become catalogue codes.
   */
  private async inParent<T>(
    path: string,
    op: string,
    run: (dir: FileHandle, name: string, root: string) => Promise<T>,
    makeParents = false,
  ): Promise<T> {
    const segments = workspaceSegments(path);
    const name = segments.pop();
    if (name === undefined) throw this.conflict(path, 'is the workspace root', op);
    const root = await this.root();
    const dir = await this.openDir(root, segments, makeParents, path);
    try {
      return await run(dir, name, root);
    } catch (err) {
      throw this.fileError(err, path, op);
    } finally {
      await dir.close();
    }
  }

  private async root(): Promise<string> {
    return realpath(await this.o.root());
  }

  /** Walks `segments` from the root one checked directory at a time (making missing ones when `create`). */
  private async openDir(
    root: string,
    segments: string[],
    create: boolean,
    path: string,
  ): Promise<FileHandle> {
    let dir = await open(root, O_PATH | O_DIRECTORY);
    for (const segment of segments) {
      const at = fdPath(dir.fd, segment);
      try {
        const next = await open(at, O_PATH | O_DIRECTORY).catch(async (err: NodeJS.ErrnoException) => {
          if (!create || err.code !== 'ENOENT') throw err;
          await mkdir(at, { mode: 0o755 });
          await lchown(at, this.o.uid, this.o.uid);
          return open(at, O_PATH | O_DIRECTORY | O_NOFOLLOW);
        });
        await dir.close();
        dir = await this.checked(next, root, path);
      } catch (err) {
        await dir.close().catch(() => undefined);
        throw this.fileError(err, path, 'open');
      }
    }
    return dir;
  }

  /** `handle` if what it names is inside the workspace; else closed, and PATH_OUTSIDE_WORKSPACE. */
  private async checked(handle: FileHandle, root: string, path: string): Promise<FileHandle> {
    const real = await readlink(fdPath(handle.fd));
    if (real === root || real.startsWith(`${root}/`)) return handle;
    await handle.close();
    throw new BerthError(
      'PATH_OUTSIDE_WORKSPACE',
      `Path ${JSON.stringify(path)} of session ${this.o.sessionId}'s sandbox resolves outside the workspace through a symlink`,
    );
  }

  /** Counts the bytes written; past `budget` the write fails WORKSPACE_QUOTA_EXCEEDED. */
  private capped(budget: number, path: string): Transform {
    let written = 0;
    return new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        written += chunk.length;
        if (written <= budget) return done(null, chunk);
        done(
          new BerthError(
            'WORKSPACE_QUOTA_EXCEEDED',
            `Writing ${path} would take session ${this.o.sessionId}'s workspace over its ${mib(this.o.limitBytes)} MiB quota (refused after ${mib(written)} MiB; nothing written)`,
          ),
        );
      },
    });
  }

  private conflict(path: string, why: string, op: string): BerthError {
    return new BerthError(
      'FILE_CONFLICT',
      `Path ${JSON.stringify(path)} of session ${this.o.sessionId}'s sandbox ${why} (${op})`,
    );
  }

  private fileError(err: unknown, path: string, op: string): unknown {
    if (err instanceof BerthError) return err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT')
      return new BerthError(
        'FILE_NOT_FOUND',
        `No such file or directory ${JSON.stringify(path)} in session ${this.o.sessionId}'s sandbox (${op})`,
        { cause: err },
      );
    const why: Record<string, string> = {
      ENOTDIR: 'has a part that is not a directory',
      EISDIR: 'is a directory',
      EEXIST: 'already exists',
      ENOTEMPTY: 'is a non-empty directory (remove it with recursive=true)',
      EINVAL: 'cannot be moved into itself',
      ELOOP: 'is a symlink loop',
    };
    if (code && why[code]) return this.conflict(path, why[code], op);
    return asDiskFull(err, `${op} of ${path} in session ${this.o.sessionId}'s sandbox`);
  }
}

/**
 * Removes `name` in the directory `parentFd`, depth first, each directory held open by
 * descriptor (O_NOFOLLOW): a symlink swapped in mid-walk is unlinked, never followed.
 */
async function removeTree(parentFd: number, name: Buffer): Promise<void> {
  const at = Buffer.concat([Buffer.from(`/proc/self/fd/${parentFd}/`), name]);
  const dir = await open(at, O_PATH | O_DIRECTORY | O_NOFOLLOW).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOTDIR' || err.code === 'ELOOP') return null;
    throw err;
  });
  if (!dir) return unlink(at);
  try {
    for (const child of await readdir(fdPath(dir.fd), { encoding: 'buffer' }))
      await removeTree(dir.fd, child);
  } finally {
    await dir.close();
  }
  await rmdir(at);
}

function entryOf(name: string, st: Stats): SandboxFileEntry {
  const type = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'other';
  return { name, type, size: st.size, mtimeMs: Math.round(st.mtimeMs), mode: st.mode & 0o7777 };
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}
