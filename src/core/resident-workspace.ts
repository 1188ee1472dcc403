/**
 * Whether this machine may run a resident session's turn on the workspace it has.
 *
 * A resident sandbox writes its workspace in place, outside the session's chain: the
 * files exist only in the data dir of the machine that ran it. The store records which
 * data dir holds them (`holder`, an id made once per data dir, so it survives a worker
 * restart on the same disk but not a wiped or replaced one) and an epoch that only an
 * operator's reset moves on. The data dir keeps a marker beside the files, written by the
 * holder before the store names it. The holder also captures the workspace into the
 * session's chain after each commit, and the store records the version captured. A turn
 * runs where both agree; on another data dir only when the chain's capture is of the
 * session's current version (no resident commit came after it: then it is materialised
 * here first); otherwise the session is refused, never run on an empty or older directory.
 *
 * Pure: the caller reads the session's record and the local marker.
 */

/** What the store says of a session's resident workspace. */
export interface ResidentRecord {
  /** The data dir holding it; null when no resident turn ran since the session began or was reset. */
  holder: string | null;
  /** That data dir as people know it (host:path), for messages. */
  holderName: string | null;
  /** When the last turn that wrote it committed (or, before any, when the holder took it). */
  writtenAt: number | null;
  /** The workspace version the chain holds a capture of (taken after that version's commit); null when none. */
  capturedVersion: number | null;
  /** When that capture was recorded. */
  capturedAt: number | null;
  /** Resets so far: a marker of an older epoch belongs to files the operator gave up. */
  epoch: number;
}

/** What the local data dir says: the marker the holder wrote beside the files; null when absent. */
export interface ResidentMarker {
  sessionId: string;
  holder: string;
  epoch: number;
}

export interface ResidentWorkspaceSnapshot {
  sessionId: string;
  record: ResidentRecord;
  /** The session's committed workspace version: the last resident commit made it. */
  version: number;
  /** This machine's data dir: its id and its name. */
  dataDir: { id: string; name: string };
  marker: ResidentMarker | null;
}

export type ResidentWorkspaceDecision =
  /** This data dir holds the workspace: run on it. */
  | { action: 'use' }
  /**
   * Nobody holds it: this data dir takes it (marker first, then the store). `emptyFirst`:
   * what is here was given up by a reset (its marker is of an older epoch), so the session
   * goes on with an empty workspace as the operator chose, not with stale files.
   */
  | { action: 'take'; emptyFirst: boolean }
  /**
   * The files are elsewhere (or lost here), but the chain holds a capture of the current
   * version: materialise it here, then take the workspace (marker, then the store).
   */
  | { action: 'materialise'; reason: string }
  /** Another data dir holds it, or this one did and lost it: refuse (RESIDENT_WORKSPACE_LOST). */
  | { action: 'refuse'; message: string };

export function decideResidentWorkspace(s: ResidentWorkspaceSnapshot): ResidentWorkspaceDecision {
  const { record, dataDir, sessionId } = s;
  const marker = s.marker?.sessionId === sessionId ? s.marker : null;
  if (record.holder === null)
    // A marker of this epoch without a record: the holder crashed between the two writes; its files are current.
    return { action: 'take', emptyFirst: marker !== null && marker.epoch < record.epoch };
  const since = record.writtenAt === null ? 'an unknown time' : new Date(record.writtenAt).toISOString();
  const captured = record.capturedVersion !== null && record.capturedVersion >= s.version;
  const held = `held only by data dir ${record.holderName ?? record.holder}, last written by a turn at ${since} (workspace version ${s.version}; ${
    record.capturedVersion === null
      ? 'no capture in its chain'
      : `its chain's newest capture is of version ${record.capturedVersion}`
  })`;
  const lostHere =
    record.holder === dataDir.id && !(marker?.holder === dataDir.id && marker.epoch === record.epoch);
  if ((record.holder !== dataDir.id || lostHere) && captured)
    return {
      action: 'materialise',
      reason: lostHere
        ? `its files are gone from ${dataDir.name}`
        : `held by data dir ${record.holderName ?? record.holder}`,
    };
  if (record.holder !== dataDir.id)
    return {
      action: 'refuse',
      message: `Session ${sessionId}'s resident workspace is ${held}; this worker's data dir ${dataDir.name} does not hold it (claim)`,
    };
  if (!lostHere) return { action: 'use' };
  return {
    action: 'refuse',
    message: `Session ${sessionId}'s resident workspace is ${held}, and its files are gone from there (no marker in ${dataDir.name}) (claim)`,
  };
}
