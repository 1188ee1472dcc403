/**
 * Writes that survive a crash whole or not at all. A file (or a directory) is built under
 * a staging name next to its final one, its content flushed to disk, then renamed into
 * place, and the rename itself flushed with its directory: after a crash at any point the
 * final name holds the old content or all of the new, never part of it, and a name a
 * caller was told is written stays written after a power cut.
 *
 * Invariants:
 * - A staging name is unique per writer (process id and random bytes), so concurrent
 *   writers, in one process or several, never write into each other's staging file.
 * - A staging file a crash left behind is never mistaken for the final one (it carries
 *   the suffix); whoever owns the directory may delete it.
 */
import { randomBytes } from 'node:crypto';
import { open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/** fsync of a file, or of a directory (which makes a rename in it durable). */
export async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** A staging name next to `path`, unique per writer: `<path>.<pid>-<random>.<ending>`. */
export function stagingPath(path: string, ending = 'tmp'): string {
  return `${path}.${process.pid}-${randomBytes(4).toString('hex')}.${ending}`;
}

/**
 * Replaces `file` with `data`: staging file, fsync, rename, fsync of the directory.
 * @param options.mode the file's mode, whatever the umask (and kept on a replaced file). @default 0o644 less the umask
 * @param options.durable false: no fsyncs, for a file whose loss in a crash is harmless; a
 *   crash may then leave the old content, the new, or (on some file systems) an empty file. @default true
 */
export async function writeFileAtomic(
  file: string,
  data: string | Uint8Array,
  options: { mode?: number; durable?: boolean } = {},
): Promise<void> {
  const durable = options.durable ?? true;
  const staged = stagingPath(file);
  try {
    const handle = await open(staged, 'wx', options.mode ?? 0o644);
    try {
      await handle.writeFile(data);
      // The umask may have narrowed the mode open() was given.
      if (options.mode !== undefined) await handle.chmod(options.mode);
      if (durable) await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(staged, file);
  } catch (err) {
    await rm(staged, { force: true });
    throw err;
  }
  if (durable) await fsyncPath(dirname(file));
}

/**
 * Moves a finished staging file or directory to `target` and makes the rename durable;
 * the caller flushed whatever content must survive a power cut. A file replaces what was
 * there. A directory does not: when `target` already exists another writer got there
 * first, its copy stands, the staged one is deleted and the result is false.
 */
export async function moveIntoPlace(staged: string, target: string): Promise<boolean> {
  try {
    await rename(staged, target);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    await rm(staged, { recursive: true, force: true });
    if (code === 'EEXIST' || code === 'ENOTEMPTY') return false;
    throw err;
  }
  await fsyncPath(dirname(target));
  return true;
}

/** A small file's text, or null when it does not exist (what a reader of such files needs first); other errors throw. */
export async function readTextIfPresent(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}
