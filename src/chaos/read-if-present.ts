/**
 * How the checks read what may legitimately be absent: absence is an answer, any other
 * failure to read is the check's failure, never an empty result that passes it.
 */
import type { Dirent } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';

/** The file's text, null when it does not exist; an error that says why it could not be read otherwise. */
export async function readIfPresent(path: string): Promise<{ text: string | null } | { error: string }> {
  try {
    return { text: await readFile(path, 'utf8') };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { text: null };
    return { error: `cannot read ${path}: ${(err as Error).message}` };
  }
}

/** A dir's entries; none when it does not exist or is not a dir (a cgroup file, say). Any other failure throws. */
export async function readdirIfPresent(dir: string): Promise<string[]>;
export async function readdirIfPresent(dir: string, o: { withFileTypes: true }): Promise<Dirent[]>;
export async function readdirIfPresent(
  dir: string,
  o?: { withFileTypes: true },
): Promise<string[] | Dirent[]> {
  try {
    return o ? await readdir(dir, o) : await readdir(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return [];
    throw err;
  }
}

/** A /proc file's text; null when its process is gone (ENOENT, or ESRCH while it exits). Any other failure throws. */
export async function readProcIfAlive(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ESRCH') return null;
    throw err;
  }
}
