/**
 * Files the worker itself puts into a turn's workspace before the sandbox gets the turn (a
 * chat message's attachments, core/inbox.ts): written through the slot's merged view, so
 * they land in the turn's attempt layer (a resident sandbox's committed layer, written in
 * place) and are committed or dropped with the turn like the agent's own writes. Owned by
 * the sandbox user, as everything the agent writes is. A path is one folder and one
 * file name, made safe where it entered berth; an existing file of that name is replaced.
 */
import { createWriteStream } from 'node:fs';
import { chown, mkdir } from 'node:fs/promises';
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
