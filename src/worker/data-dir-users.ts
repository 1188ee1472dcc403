/**
 * Which live workers use a data dir: each worker writes its pid under `<data>/workers/` at
 * start and removes it at stop, so the last one to leave knows it may undo what the data
 * dir's users share (the slot root mount). The store cannot say: its workers may run on
 * other machines, each on a data dir of its own.
 *
 * Invariants: a file whose pid is no longer a live process (a worker that crashed) does not
 * count; a worker never counts itself.
 */
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isProcessAlive } from '../workspace/index.js';

const DIR = 'workers';

export async function joinDataDir(dataDir: string, workerId: string): Promise<void> {
  await mkdir(join(dataDir, DIR), { recursive: true });
  await writeFile(join(dataDir, DIR, workerId), String(process.pid));
}

/** Removes this worker's file; true when no other live worker uses the data dir. */
export async function leaveDataDir(dataDir: string, workerId: string): Promise<boolean> {
  await rm(join(dataDir, DIR, workerId), { force: true });
  for (const other of await readdir(join(dataDir, DIR)).catch(() => [] as string[])) {
    const pid = Number(await readFile(join(dataDir, DIR, other), 'utf8').catch(() => ''));
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isProcessAlive(pid)) return false;
  }
  return true;
}
