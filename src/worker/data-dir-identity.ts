/**
 * What identifies this machine's data dir: a random id made once, in `<data>/data-dir-id`,
 * and the data dir as people know it (`host:path`). Every worker on the data dir reads the
 * same id (they share its workspaces); it survives a worker restart on the same disk and is
 * gone with a wiped or replaced one — which is what decides whether a resident workspace
 * written in place is still here. A host name or a path would not: a replacement machine
 * may reuse both with an empty disk.
 *
 * Workers starting together agree: the id is staged, flushed, then linked into place, and
 * the first link wins; everyone reads what won.
 */
import { randomBytes } from 'node:crypto';
import { link, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fsyncPath, readTextIfPresent, stagingPath, writeFileAtomic } from '../durable-files/index.js';

export interface DataDirIdentity {
  id: string;
  name: string;
}

const FILE = 'data-dir-id';

export async function dataDirIdentity(dataDir: string): Promise<DataDirIdentity> {
  const file = join(dataDir, FILE);
  const name = `${hostname()}:${dataDir}`;
  const existing = await readId(file);
  if (existing) return { id: existing, name };
  const staged = stagingPath(file, 'new');
  await writeFileAtomic(staged, `dd_${randomBytes(12).toString('hex')}\n`);
  try {
    await link(staged, file);
    await fsyncPath(dataDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await rm(staged, { force: true });
  }
  const id = await readId(file);
  if (!id) throw new Error(`${file} is empty or unreadable after it was written`);
  return { id, name };
}

async function readId(file: string): Promise<string | null> {
  const id = (await readTextIfPresent(file))?.trim();
  return id ? id : null;
}
