/**
 * Files the worker itself puts into a turn's workspace before the sandbox gets the turn (a
 * chat message's attachments, core/inbox.ts): written through the slot's merged view, so
 * they land in the turn's attempt layer (a resident sandbox's committed layer, written in
 * place) and are committed or dropped with the turn like the agent's own writes. Owned by
 * the sandbox user, as everything the agent writes is. A path is one folder and one
 * file name, made safe where it entered berth; an existing file of that name is replaced.
 */
import { createWriteStream } from 'node:fs';
import { chown, mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { asDiskFull } from '../core/index.js';

export async function writeSlotFile(
  slot: string,
  folder: string,
  name: string,
  body: AsyncIterable<Uint8Array>,
  uid: number,
): Promise<void> {
  const dir = join(slot, folder);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await chown(dir, uid, uid);
  const path = join(dir, name);
  try {
    await pipeline(Readable.from(body), createWriteStream(path, { mode: 0o644 }));
  } catch (err) {
    throw asDiskFull(err, `writing ${folder}/${name} into the workspace`);
  }
  await chown(path, uid, uid);
}

/** The regular files directly in `dir` (a turn's attempt layer's folder: what the turn wrote or changed there); none when absent. */
export async function listLayerFiles(dir: string): Promise<{ name: string; path: string; size: number }[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return [];
    throw err;
  });
  const files: { name: string; path: string; size: number }[] = [];
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name)))
    if (e.isFile()) {
      const path = join(dir, e.name);
      files.push({ name: e.name, path, size: (await stat(path)).size });
    }
  return files;
}
