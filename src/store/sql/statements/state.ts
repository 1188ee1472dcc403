/**
 * The statements on `session_state`: what committed turns put. Written once for both
 * engines (../statements.ts says in which dialect). Each header lists the statement's
 * parameters and what it returns; a guarded one (@guard) must change exactly one row, and
 * says why nothing else can happen (statements.test.ts holds the headers to the SQL and
 * the guards to their callers).
 */

/**
 * One key a committing turn put.
 * @param sessionId the session
 * @param key the key
 * @param value its JSON value
 * @param turnId the turn
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 (inserted or replaced)
 */
export const UPSERT_STATE = `
INSERT INTO session_state (session_id, key, value, turn_id, updated_at) VALUES (:sessionId, :key, :value, :turnId, :now)
ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, turn_id = excluded.turn_id, updated_at = excluded.updated_at`;

/**
 * One key a committing turn deleted (put null).
 * @param sessionId the session
 * @param key the key
 * @returns changed rows: 1 = deleted, 0 = it was not set (nothing to do)
 */
export const DELETE_STATE = `DELETE FROM session_state WHERE session_id = :sessionId AND key = :key`;

/**
 * A session's committed state.
 * @param sessionId the session
 * @returns rows (key, value), by key
 */
export const STATE_OF_SESSION = `SELECT key, value FROM session_state WHERE session_id = :sessionId ORDER BY key`;

/**
 * The keys whose committed value a turn wrote and still holds (a later put or delete of a
 * key takes it from the turn: the store keeps no older values).
 * @param sessionId the session
 * @param turnId the turn
 * @returns rows (key, value), by key
 */
export const STATE_OF_TURN = `
SELECT key, value FROM session_state WHERE session_id = :sessionId AND turn_id = :turnId ORDER BY key`;

/**
 * A fork's state: every key the source's committed turns put, as of now.
 * @param from the source session
 * @param to the new session
 * @param now the transition's time, epoch ms
 * @returns changed rows: one per key (any number)
 */
export const COPY_STATE = `
INSERT INTO session_state (session_id, key, value, turn_id, updated_at)
SELECT :to, key, value, turn_id, :now FROM session_state WHERE session_id = :from`;
