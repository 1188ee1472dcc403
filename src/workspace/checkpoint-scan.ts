/**
 * What a turn's attempt layer holds, as an index for incremental checkpoints: every path
 * the upper dir adds or changes, with a signature of its metadata, and every committed path
 * the merged view no longer shows (a whiteout, or a child of an opaque dir). The delta
 * between two indexes is a promotion plan (promotion.ts's steps), packed by the same code
 * as a sealed layer: a checkpoint's object is a layer archive of what changed since the
 * previous checkpoint, applied in order over the committed tree to bring a retry back.
 *
 * Change detection is by metadata, not content: a file is sent again when its size, mtime,
 * ctime, inode, mode or owner changed (ctime moves on every write, even one that keeps
 * mtime, and cannot be set back from user space), so a scan reads directories and
 * lstat()s, never file contents, and a turn that changed nothing costs only that walk.
 *
 * Pure of side effects: it reads the three dirs while the overlay is mounted.
 */
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { PlanStep, PromotionPlan } from './promotion.js';

/** path → signature: 'x' = gone from the merged view; 'd:…' a dir; 'f:…' a file or link (moved in from upper). */
export type CheckpointIndex = Map<string, string>;

const GONE = 'x';

export interface AttemptDirs {
  upper: string;
  merged: string;
  committed: string;
}

/** The attempt layer's index, parents before children. */
export async function scanAttempt(dirs: AttemptDirs): Promise<CheckpointIndex> {
  return new Map(await scanDir('', dirs));
}

/**
 * One dir of the upper layer, then its subdirs, each in order. Everything that does not
 * depend on another call runs at once (the thread pool overlaps them): a dir's entries are
 * lstat()ed together and its subdirs scanned together. A dir the committed tree does not
 * have (made by the turn) hides nothing, so its merged view is not read.
 */
async function scanDir(rel: string, dirs: AttemptDirs): Promise<[string, string][]> {
  const [upperEntries, committed] = await Promise.all([
    readdir(join(dirs.upper, rel), { withFileTypes: true }),
    listDir(join(dirs.committed, rel)),
  ]);
  const out: [string, string][] = [];
  if (committed.length > 0) {
    const merged = new Set(await readdir(join(dirs.merged, rel)));
    for (const name of committed) if (!merged.has(name)) out.push([join(rel, name), GONE]);
  }
  const entries = upperEntries.filter((e) => !e.isCharacterDevice()); // whiteouts: seen above as gone
  const stats = await Promise.all(entries.map((e) => lstat(join(dirs.upper, rel, e.name), { bigint: true })));
  const subdirs: string[] = [];
  for (const [i, entry] of entries.entries()) {
    const path = join(rel, entry.name);
    const st = stats[i]!;
    if (entry.isDirectory()) {
      out.push([path, `d:${st.mode}:${st.uid}:${st.gid}`]);
      subdirs.push(path);
    } else
      out.push([path, `f:${st.mode}:${st.uid}:${st.gid}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`]);
  }
  for (const below of await Promise.all(subdirs.map((d) => scanDir(d, dirs)))) out.push(...below);
  return out;
}

/**
 * What changed from `before` to `after`, as a plan: first the deletions (what `before`
 * had and `after` lacks, and what newly went from the merged view), then the dirs and
 * files that are new or changed, parents first. Empty when nothing changed.
 */
export function checkpointDelta(before: CheckpointIndex, after: CheckpointIndex): PromotionPlan {
  const deletions: string[] = [];
  for (const [path, sig] of before) if (sig !== GONE && !after.has(path)) deletions.push(path);
  for (const [path, sig] of after) if (sig === GONE && before.get(path) !== GONE) deletions.push(path);
  deletions.sort();
  const steps: PlanStep[] = [];
  for (const path of deletions) {
    // A delete takes everything under it: one for the topmost path is enough.
    const last = steps.at(-1);
    if (last && path.startsWith(`${last.path}/`)) continue;
    steps.push({ op: 'delete', path });
  }
  for (const [path, sig] of after) {
    if (sig === GONE || before.get(path) === sig) continue;
    if (sig.startsWith('d:')) {
      const [, mode, uid, gid] = sig.split(':');
      steps.push({ op: 'mkdir', path, mode: Number(mode) & 0o7777, uid: Number(uid), gid: Number(gid) });
    } else steps.push({ op: 'move', from: path, path });
  }
  return { version: 1, steps };
}

async function listDir(path: string): Promise<string[]> {
  try {
    return await readdir(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return [];
    throw err;
  }
}
