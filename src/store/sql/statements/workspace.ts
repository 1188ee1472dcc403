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
 * @param blobKey where the object is in the blob store
 * @param size its size in bytes
 * @param turnId the commit that made it (a layer), or null (a snapshot)
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = recorded, 0 = that version's object of this kind is recorded already
 */
export const INSERT_WORKSPACE_OBJECT = `
INSERT INTO workspace_layers (session_id, version, kind, blob_key, size, turn_id, created_at)
VALUES (:sessionId, :version, :kind, :blobKey, :size, :turnId, :now)
ON CONFLICT (session_id, version, kind) DO NOTHING`;

/**
 * What materialises a session's workspace: its newest snapshot, then every layer after it.
 * @param sessionId the session
 * @returns rows (version, kind, blob_key, size, turn_id), by version
 */
export const WORKSPACE_CHAIN = `
SELECT version, kind, blob_key, size, turn_id FROM workspace_layers
WHERE session_id = :sessionId AND version >= COALESCE(
  (SELECT MAX(version) FROM workspace_layers WHERE session_id = :sessionId AND kind = 'snapshot'), 0)
AND (kind = 'layer' OR version = (SELECT MAX(version) FROM workspace_layers WHERE session_id = :sessionId AND kind = 'snapshot'))
ORDER BY version, kind DESC`;

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
