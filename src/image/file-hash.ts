// sha256 of text and of files, and the cached hash of the node binary: hashing ~100 MB on every
// `ensureBaseImage` would cost more than the image lookup it precedes.
//
// Invariants:
// - The cache lives in `<cacheDir>/node-sha256.json`, keyed by path and trusted only while the
//   file's size and mtimeMs are unchanged; a missing or corrupt cache is rebuilt, never an error.
// - The cache file is replaced atomically (writeFileAtomic), so concurrent callers cannot
//   corrupt it; the last writer wins.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { writeFileAtomic } from '../durable-files/index.js';

interface HashCacheEntry {
  size: number;
  mtimeMs: number;
  sha256: string;
}

/** sha256 of a file, remembered in `<cacheDir>/node-sha256.json` under (path, size, mtimeMs). */
export async function cachedSha256(file: string, cacheDir: string): Promise<string> {
  const st = await fs.stat(file);
  const cacheFile = path.join(cacheDir, 'node-sha256.json');
  const cache = await readHashCache(cacheFile);
  const hit = cache[file];
  if (hit && hit.size === st.size && hit.mtimeMs === st.mtimeMs) return hit.sha256;
  const sha256 = await sha256File(file);
  cache[file] = { size: st.size, mtimeMs: st.mtimeMs, sha256 };
  await fs.mkdir(cacheDir, { recursive: true });
  await writeFileAtomic(cacheFile, `${JSON.stringify(cache, null, 2)}\n`);
  return sha256;
}

async function readHashCache(cacheFile: string): Promise<Record<string, HashCacheEntry>> {
  try {
    const parsed: unknown = JSON.parse(await fs.readFile(cacheFile, 'utf8'));
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      return parsed as Record<string, HashCacheEntry>;
    }
  } catch {
    // Missing or corrupt: the cache is only an optimisation, start over.
  }
  return {};
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return hash.digest('hex');
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
