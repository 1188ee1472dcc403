/**
 * Giving up a machine's copy of a session's workspace (workspace-cache.ts) to free disk,
 * safely against a crash at any step and against every process sharing the data dir:
 *
 *   <session>/pins/<pid>   written by a process before it reads the copy's stamp, removed
 *                          when it no longer uses the copy (its sandbox released)
 *   <session>/evicting     {pid, at}: written exclusively by the evicting process first
 *
 * Eviction: marker (exclusive) → read the pins → any live one: the marker goes, nothing is
 * touched; none: the stamp goes first, then the tree (renamed aside, then deleted). A pinner
 * writes its pin, then waits while a live marker exists. Whichever of the two wrote first,
 * the other sees it: an eviction never runs under a process that uses the copy, and a
 * process never reads a copy being evicted. A SIGKILL anywhere leaves either the stamp
 * (the tree whole: nothing was removed yet) or no stamp, so a half-deleted tree is never
 * taken for a version of the chain; the next turn materialises it afresh. A marker or pin
 * whose process is dead is stale and ignored (a marker also after MARKER_STALE_MS, against
 * a reused pid). The evicted session's dir goes too (its pins while the marker holds, the
 * dir after): a pin written meanwhile may be lost with it, so a pinner checks, once no
 * marker is left, that its pin is still there, and writes it again if not.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, rmdir, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type CacheEntry, sleep } from '../core/index.js';
import type { WorkspaceLayout } from './layout.js';
import { treeDiskBytes } from './quota.js';

/** An eviction takes seconds; a marker this old names a pid the system reused. */
const MARKER_STALE_MS = 5 * 60_000;
const MARKER_POLL_MS = 50;
/** A marker is a few bytes written at once: one still unreadable after this was cut by a crash. */
const UNREADABLE_MARKER_STALE_MS = 10_000;
/** What a session dir keeps across an eviction: the protocol's own files, the resident files, the layers. */
const KEPT = new Set(['pins', 'evicting', 'layers', 'resident', 'resident.holder']);
/** The protocol's own files: not the copy's bytes. */
const PROTOCOL = new Set(['pins', 'evicting']);

/** A session's copy as the budget sees it: its last use is its dir's mtime (touched at every pin and unpin). */
export type CopyOnDisk = CacheEntry;

export type EvictOutcome = 'evicted' | 'pinned' | 'busy' | 'resident';

/** Marks the copy used by this process; returns once no eviction runs on it. */
export async function pinCopy(layout: WorkspaceLayout, sessionId: string, now: () => number): Promise<void> {
  const pin = join(layout.pinsDir(sessionId), String(process.pid));
  // An eviction that read the pins before this one was written may remove the session dir
  // with it; it does so before its marker goes, so a pin still there after the wait holds.
  do {
    await mkdir(layout.pinsDir(sessionId), { recursive: true, mode: 0o755 });
    await writeFile(pin, '').catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err; // the dir removed under it: pinned again below
    });
    await touch(layout.sessionDir(sessionId));
    while (await liveMarker(layout.evictingMarkerPath(sessionId), now())) await sleep(MARKER_POLL_MS);
  } while (!(await exists(pin)));
}

export async function unpinCopy(layout: WorkspaceLayout, sessionId: string): Promise<void> {
  await rm(join(layout.pinsDir(sessionId), String(process.pid)), { force: true });
  await touch(layout.sessionDir(sessionId));
}

/**
 * Every session dir on the data dir, measured. `measured` (kept by the caller across calls)
 * spares walking a tree again: a copy not pinned and without layers changes only while
 * pinned, and every pin and unpin touches its dir's mtime.
 */
export async function listCopies(
  layout: WorkspaceLayout,
  measured: Map<string, { mtimeMs: number; bytes: number }>,
): Promise<CopyOnDisk[]> {
  const seen = new Set<string>();
  const out: CopyOnDisk[] = [];
  for (const sessionId of await readdir(layout.sessionsDir).catch(() => [] as string[])) {
    if (sessionId.startsWith('.')) continue; // an overlay probe
    const dir = layout.sessionDir(sessionId);
    const st = await stat(dir).catch(() => null);
    if (!st?.isDirectory()) continue;
    seen.add(sessionId);
    const names = await readdir(dir).catch(() => [] as string[]);
    const pinned = (await livePins(layout, sessionId)).length > 0;
    const hasLayers = (await readdir(layout.layersDir(sessionId)).catch(() => [])).length > 0;
    const known = measured.get(sessionId);
    let bytes = known?.bytes ?? 0;
    if (pinned || hasLayers || known?.mtimeMs !== st.mtimeMs) {
      bytes = 0;
      for (const name of names) if (!PROTOCOL.has(name)) bytes += await treeDiskBytes(join(dir, name));
      measured.set(sessionId, { mtimeMs: st.mtimeMs, bytes });
    }
    out.push({
      sessionId,
      bytes,
      lastUsedAt: st.mtimeMs,
      pinned,
      resident: names.includes('resident.holder') || names.includes('resident'),
      hasLayers,
      held: names.includes('committed'),
    });
  }
  for (const sessionId of measured.keys()) if (!seen.has(sessionId)) measured.delete(sessionId);
  return out;
}

/** Removes the copy unless a live process pins it, another eviction runs, or it is resident. */
export async function evictCopy(
  layout: WorkspaceLayout,
  sessionId: string,
  now: () => number,
): Promise<EvictOutcome> {
  const outcome = await evictHoldingMarker(layout, sessionId, now);
  // The dir itself once its marker went: unless a pinner came in meanwhile (not empty then).
  if (outcome === 'evicted') await rmdir(layout.sessionDir(sessionId)).catch(() => undefined);
  return outcome;
}

async function evictHoldingMarker(
  layout: WorkspaceLayout,
  sessionId: string,
  now: () => number,
): Promise<EvictOutcome> {
  const marker = layout.evictingMarkerPath(sessionId);
  if (!(await takeMarker(marker, now()))) return 'busy';
  try {
    if ((await livePins(layout, sessionId)).length > 0) return 'pinned';
    const dir = layout.sessionDir(sessionId);
    const names = await readdir(dir);
    if (names.includes('resident.holder') || names.includes('resident')) return 'resident';
    if ((await readdir(layout.layersDir(sessionId)).catch(() => [])).length > 0) return 'pinned';
    // The stamp first: from here on the tree is never read as a version of the chain.
    await rm(join(dir, 'committed.stamp'), { force: true });
    for (const name of names) {
      if (KEPT.has(name) || name === 'committed.stamp') continue;
      const aside = join(dir, `${name}.evicted-${randomBytes(4).toString('hex')}`);
      await rename(join(dir, name), aside).catch(() => undefined);
      await rm(aside, { recursive: true, force: true });
    }
    // What is left is the protocol's files: gone too, so a session served once costs no inodes
    // for good. Only while the marker holds (a pinner checks its pin after the marker went).
    await rm(layout.pinsDir(sessionId), { recursive: true, force: true });
    if (names.includes('layers')) await rmdir(layout.layersDir(sessionId)).catch(() => undefined);
    return 'evicted';
  } finally {
    await rm(marker, { force: true });
  }
}

/** Writes the marker exclusively; a stale one (its process dead) is taken over. */
async function takeMarker(marker: string, now: number): Promise<boolean> {
  for (let tries = 0; tries < 2; tries++) {
    const file = await open(marker, 'wx').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EEXIST') return null;
      throw err;
    });
    if (file) {
      try {
        await file.writeFile(JSON.stringify({ pid: process.pid, at: now }));
      } finally {
        await file.close();
      }
      return true;
    }
    if (await liveMarker(marker, now)) return false;
    await rm(marker, { force: true });
  }
  return false;
}

/** An eviction under way: a marker whose process lives and that is not too old. Unreadable = written just now. */
async function liveMarker(marker: string, now: number): Promise<boolean> {
  const text = await readFile(marker, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (text === null) return false;
  try {
    const { pid, at } = JSON.parse(text) as { pid: number; at: number };
    return isProcessAlive(pid) && now - at < MARKER_STALE_MS;
  } catch {
    // Being written (its writer alive), or cut by a crash while it was: judged by its age.
    const st = await stat(marker).catch(() => null);
    return st !== null && now - st.mtimeMs < UNREADABLE_MARKER_STALE_MS;
  }
}

async function livePins(layout: WorkspaceLayout, sessionId: string): Promise<number[]> {
  const pins = await readdir(layout.pinsDir(sessionId)).catch(() => [] as string[]);
  return pins.map(Number).filter((pid) => Number.isInteger(pid) && isProcessAlive(pid));
}

/** Whether a process with this pid exists (EPERM: it does, as another user's). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function touch(dir: string): Promise<void> {
  const t = new Date();
  await utimes(dir, t, t).catch(() => undefined);
}
