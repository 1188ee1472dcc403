/**
 * The statements on `workspace_layers`: a session's committed workspace as a chain of
 * immutable blob-store objects, version by version. A commit that changed files appends
 * its layer; a snapshot at version V holds the whole tree of V and makes every row before
 * it unnecessary. Written once for both engines.
 */

/**
 * One object of a session's chain. A snapshot of a version already recorded (two workers
 * compacting at once) inserts nothing.
 * @param sessionId the session
 * @param version the workspace version the object brings the tree to
 * @param kind 'layer' (one commit's changes) or 'snapshot' (the whole tree)
 * @param part the object's place in its snapshot (0, 1, …: applied in order); 0 for a layer
 * @param rewoundTo a rewind's snapshot: the version whose tree it holds; null otherwise
 * @param blobKey where the object is in the blob store
 * @param size its size in bytes
 * @param turnId the commit that made it (a layer), or null (a snapshot)
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = recorded, 0 = that version's object of this kind is recorded already
 */
export const INSERT_WORKSPACE_OBJECT = `
INSERT INTO workspace_layers (session_id, version, kind, part, rewound_to, blob_key, size, turn_id, created_at)
VALUES (:sessionId, :version, :kind, :part, :rewoundTo, :blobKey, :size, :turnId, :now)
ON CONFLICT (session_id, version, kind, part) DO NOTHING`;

/**
 * Every object a session's chain still names, older snapshots and their layers included: the
 * versions whose tree can still be built (history, rewind, fork).
 * @param sessionId the session
 * @returns rows (version, kind, part, rewound_to, blob_key, size, turn_id, created_at), by version, then part
 */
export const WORKSPACE_ROWS = `
SELECT version, kind, part, rewound_to, blob_key, size, turn_id, created_at FROM workspace_layers
WHERE session_id = :sessionId ORDER BY version, kind DESC, part`;

/**
 * Compaction: once a snapshot of `version` is recorded, the older objects of the chain are
 * no longer needed to materialise it (a fork that shares them has rows of its own).
 * @param sessionId the session
 * @param version the new snapshot's
 * @returns changed rows: how many rows it dropped (any number; idempotent)
 */
export const DROP_SUPERSEDED_OBJECTS = `
DELETE FROM workspace_layers WHERE session_id = :sessionId
AND (version < :version OR (version = :version AND kind = 'layer'))`;

/**
 * Garbage collection asks whether any chain still names an object.
 * @param blobKey the object's key
 * @returns one row when some session's chain names it, none otherwise
 */
export const WORKSPACE_OBJECT_NAMED = `SELECT 1 AS named FROM workspace_layers WHERE blob_key = :blobKey LIMIT 1`;

/**
 * What a rewind must wait for: the session's running turn and its inbound messages not yet
 * answered (pending, including one in backoff, or taken by a turn).
 * @param sessionId the session
 * @returns one row (running_turn: a running turn's id or null, open_messages: how many)
 */
export const SESSION_OPEN_WORK = `
SELECT (SELECT id FROM turns WHERE session_id = :sessionId AND status = 'running' LIMIT 1) AS running_turn,
  (SELECT COUNT(*) FROM messages WHERE session_id = :sessionId AND direction = 'in'
    AND status IN ('pending', 'processing')) AS open_messages`;

/**
 * A rewind's new version (or a resident capture's that finds its version captured already),
 * compare-and-set on the version it read under the session's lock.
 * @param id the session
 * @param from the version read
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = moved on
 * @guard rewindSession holds the session row (SESSION_LOCKED), recordResidentCapture passed
 *   the fence (FENCE), which locks it; each read its version under it; only transitions
 *   holding that row move the version
 */
export const ADVANCE_WORKSPACE_VERSION = `
UPDATE sessions SET workspace_version = workspace_version + 1, updated_at = :now
WHERE id = :id AND workspace_version = :from`;
