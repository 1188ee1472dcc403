/**
 * The statements on `turn_checkpoints`: what a running turn saved of its work so far, for
 * a retry of the same messages to resume from. A checkpoint never touches the committed
 * workspace, replies or state. Written once for both engines.
 */

/**
 * One checkpoint of the work on a session's lead message.
 * @param sessionId the session
 * @param messageId the lead (first) message of the turn that made it
 * @param seq its number in that work, from 1
 * @param baseSeq the checkpoint its object is a delta over, 0 = the committed tree
 * @param count how many checkpoints of the work its files hold (BERTH_CHECKPOINT's count)
 * @param turnId the turn that made it
 * @param generation that turn's generation
 * @param label the job's label ('' for none)
 * @param blobKey where its object is in the blob store, '' when nothing changed since its base
 * @param size the object's size in bytes
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = recorded, 0 = that number is taken (a racing writer of the same work)
 */
export const INSERT_CHECKPOINT = `
INSERT INTO turn_checkpoints (session_id, message_id, seq, base_seq, count, turn_id, generation, label, blob_key, size, created_at)
VALUES (:sessionId, :messageId, :seq, :baseSeq, :count, :turnId, :generation, :label, :blobKey, :size, :now)
ON CONFLICT (session_id, message_id, seq) DO NOTHING`;

/**
 * The checkpoints of the work on a lead message, oldest first.
 * @param sessionId the session
 * @param messageId the lead message
 * @returns rows
 */
export const CHECKPOINTS_OF_MESSAGE = `
SELECT * FROM turn_checkpoints WHERE session_id = :sessionId AND message_id = :messageId ORDER BY seq`;

/**
 * The highest checkpoint number of the work on a lead message.
 * @param sessionId the session
 * @param messageId the lead message
 * @returns one row (seq, null when there is none)
 */
export const LAST_CHECKPOINT_SEQ = `
SELECT MAX(seq) AS seq FROM turn_checkpoints WHERE session_id = :sessionId AND message_id = :messageId`;

/**
 * A commit's collection: every checkpoint of the session (only the committing turn's work can have any).
 * @param sessionId the session
 * @returns changed rows: any number
 */
export const DELETE_CHECKPOINTS_OF_SESSION = `DELETE FROM turn_checkpoints WHERE session_id = :sessionId`;

/**
 * One completed model answer of the work on a session's lead message (the first wins: a
 * repeat of the same request is answered from it, so it never has a second).
 * @param sessionId the session
 * @param messageId the lead message of the turn that made the call
 * @param requestHash sha-256 of the call and its request body, hex
 * @param turnId the turn that made it
 * @param generation that turn's generation
 * @param status the upstream's HTTP status
 * @param contentType its content type (SSE or JSON)
 * @param body its body as received, base64
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = journalled, 0 = that request already was
 */
export const INSERT_MODEL_RESPONSE = `
INSERT INTO model_journal (session_id, message_id, request_hash, turn_id, generation, status, content_type, body, created_at)
VALUES (:sessionId, :messageId, :requestHash, :turnId, :generation, :status, :contentType, :body, :now)
ON CONFLICT (session_id, message_id, request_hash) DO NOTHING`;

/**
 * The journalled answer to a request of the work on a lead message.
 * @param sessionId the session
 * @param messageId the lead message
 * @param requestHash as INSERT_MODEL_RESPONSE's
 * @returns one row, or none
 */
export const MODEL_RESPONSE_OF_REQUEST = `
SELECT * FROM model_journal
WHERE session_id = :sessionId AND message_id = :messageId AND request_hash = :requestHash`;

/**
 * A commit's collection of the journal, with its checkpoints.
 * @param sessionId the session
 * @returns changed rows: any number
 */
export const DELETE_JOURNAL_OF_SESSION = `DELETE FROM model_journal WHERE session_id = :sessionId`;

/**
 * The sweep of the journal, as SWEEP_CHECKPOINTS: answers of work no retry will resume.
 * @returns changed rows: any number
 */
export const SWEEP_JOURNAL = `
DELETE FROM model_journal WHERE NOT EXISTS (
  SELECT 1 FROM messages m WHERE m.id = model_journal.message_id AND m.status IN ('pending', 'processing'))`;

/**
 * The sweep: checkpoints of work that ended otherwise (its lead message failed, cancelled,
 * interrupted, taken back or gone with its session), which no retry will resume.
 * @returns rows (blob_key) of the checkpoints deleted
 */
export const SWEEP_CHECKPOINTS = `
DELETE FROM turn_checkpoints WHERE NOT EXISTS (
  SELECT 1 FROM messages m WHERE m.id = turn_checkpoints.message_id AND m.status IN ('pending', 'processing'))
RETURNING blob_key`;

/**
 * Whether some checkpoint names the blob (garbage collection keeps it).
 * @param blobKey the object
 * @returns a row when one does
 */
export const CHECKPOINT_OBJECT_NAMED = `SELECT 1 FROM turn_checkpoints WHERE blob_key = :blobKey LIMIT 1`;
