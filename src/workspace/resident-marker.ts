/**
 * The marker a data dir writes beside a resident workspace it holds (the files a resident
 * sandbox writes in place): which session, which data dir, which epoch of the store's
 * record. It is written, durably, before the store names this data dir as the holder, so
 * wherever the store names a holder its marker exists — unless the disk was lost or wiped,
 * which is exactly what a claim must notice. An unreadable marker reads as absent: the
 * claim then refuses rather than run on files it cannot vouch for.
 */
import { mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { ResidentMarker } from '../core/index.js';
import { readTextIfPresent, writeFileAtomic } from '../durable-files/index.js';
import type { WorkspaceLayout } from './layout.js';

export async function readResidentMarker(
  layout: WorkspaceLayout,
  sessionId: string,
): Promise<ResidentMarker | null> {
  const text = await readTextIfPresent(layout.residentMarkerPath(sessionId));
  if (text === null) return null;
  try {
    const m = JSON.parse(text) as Partial<ResidentMarker>;
    if (typeof m.sessionId !== 'string' || typeof m.holder !== 'string' || typeof m.epoch !== 'number')
      return null;
    return { sessionId: m.sessionId, holder: m.holder, epoch: m.epoch };
  } catch {
    return null;
  }
}

export async function writeResidentMarker(layout: WorkspaceLayout, marker: ResidentMarker): Promise<void> {
  const file = layout.residentMarkerPath(marker.sessionId);
  await mkdir(dirname(file), { recursive: true, mode: 0o755 });
  await writeFileAtomic(file, `${JSON.stringify(marker)}\n`);
}

/** The files an operator's reset gave up: the session goes on with an empty workspace here. */
export async function emptyResidentWorkspace(layout: WorkspaceLayout, sessionId: string): Promise<void> {
  await rm(layout.committedPath(sessionId), { recursive: true, force: true });
}
