/**
 * Where a data dir keeps session workspaces and sandbox slots: the one layout Workspaces
 * writes and whatever inspects a data dir (the chaos checker) reads, so the two cannot drift.
 *
 *   <data>/workspaces/<session>/committed/      the committed layer
 *   <data>/workspaces/<session>/layers/<turn>/   one attempt layer per turn
 *   <data>/workspaces/<session>/resident/        a resident agent's own upper layer
 *   <data>/workspaces/<session>/resident.holder  the marker of the data dir holding it in place
 *   <data>/workspaces/<session>/pins/<pid>       a live process uses the copy (copy-eviction.ts)
 *   <data>/workspaces/<session>/evicting         an eviction of the copy is under way
 *   <data>/slots/<sandbox>/                      where a sandbox's workspace is mounted
 *
 * Pure: paths only, no I/O.
 */
import { join } from 'node:path';

export interface WorkspaceLayout {
  slotsDir: string;
  sessionsDir: string;
  slotPath(sandboxName: string): string;
  sessionDir(sessionId: string): string;
  committedPath(sessionId: string): string;
  /** The parent of the session's attempt layers; absent until its first turn mounted one. */
  layersDir(sessionId: string): string;
  layerPath(sessionId: string, turnId: string): string;
  residentPath(sessionId: string): string;
  /** Written by the data dir that holds the session's resident workspace, beside its files. */
  residentMarkerPath(sessionId: string): string;
  /** One empty file per process using the copy, named by its pid. */
  pinsDir(sessionId: string): string;
  evictingMarkerPath(sessionId: string): string;
}

export function workspaceLayout(dataDir: string): WorkspaceLayout {
  const slotsDir = join(dataDir, 'slots');
  const sessionsDir = join(dataDir, 'workspaces');
  const sessionDir = (sessionId: string) => join(sessionsDir, sessionId);
  const layersDir = (sessionId: string) => join(sessionDir(sessionId), 'layers');
  return {
    slotsDir,
    sessionsDir,
    slotPath: (sandboxName) => join(slotsDir, sandboxName),
    sessionDir,
    committedPath: (sessionId) => join(sessionDir(sessionId), 'committed'),
    layersDir,
    layerPath: (sessionId, turnId) => join(layersDir(sessionId), turnId),
    residentPath: (sessionId) => join(sessionDir(sessionId), 'resident'),
    residentMarkerPath: (sessionId) => join(sessionDir(sessionId), 'resident.holder'),
    pinsDir: (sessionId) => join(sessionDir(sessionId), 'pins'),
    evictingMarkerPath: (sessionId) => join(sessionDir(sessionId), 'evicting'),
  };
}
