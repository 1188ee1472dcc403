/**
 * The statements on `messages`: inbound messages through their states (pending →
 * processing → done | failed | interrupted; pending → cancelled), and replies. Written once for both engines
 * (../statements.ts says in which dialect). Each header lists the statement's parameters
 * and what it returns; a guarded one (@guard) must change exactly one row, and says why
 * nothing else can happen (statements.test.ts holds the headers to the SQL and the guards
 * to their callers).
 */
import { PAGE_IDS } from '../session-page.js';

/**
 * A user's message, pending and runnable at once.
 * @param sessionId the session
 * @param text the message
 * @param data its JSON data (a channel's: the files sent with it), or null
 * @param now the transition's time, epoch ms
 * @returns the new row
 */
export const INSERT_INBOUND = `
INSERT INTO messages (session_id, direction, text, data, status, process_after, created_at)
VALUES (:sessionId, 'in', :text, :data, 'pending', :now, :now) RETURNING *`;

/**
 * A reply of a committed turn (done as it is inserted).
 * @param sessionId the session
 * @param text the reply
 * @param data its JSON data, or null
 * @param turnId the turn that wrote it
 * @param inReplyTo JSON array of the inbound message ids it answers
 * @param now the transition's time, epoch ms
 * @returns the new row's id
 */
export const INSERT_OUTBOUND = `
INSERT INTO messages (session_id, direction, text, data, status, turn_id, in_reply_to, created_at)
VALUES (:sessionId, 'out', :text, :data, 'done', :turnId, :inReplyTo, :now) RETURNING id`;

/**
 * One message.
 * @param id the message
 * @returns the row, or none
 */
export const MESSAGE_BY_ID = `SELECT * FROM messages WHERE id = :id`;

/**
 * A committed turn's replies, oldest first.
 * @param sessionId the session
 * @param turnId the turn that wrote them
 * @returns rows
 */
export const REPLIES_OF_TURN = `
SELECT * FROM messages WHERE session_id = :sessionId AND turn_id = :turnId AND direction = 'out' ORDER BY id`;

/**
 * A page of a session's messages, oldest first.
 * @param sessionId the session
 * @param afterId the last id of the previous page, 0 = first page
 * @param limit page size
 * @returns rows
 */
export const MESSAGES_AFTER = `
SELECT * FROM messages WHERE session_id = :sessionId AND id > :afterId ORDER BY id LIMIT :limit`;

/**
 * Pending inbound messages of one session, oldest first: the next turn's candidates (the
 * oldest decides whether any is runnable, nextBatch which go together).
 * @param sessionId the session
 * @returns rows
 */
export const PENDING_OF_SESSION = `
SELECT * FROM messages WHERE session_id = :sessionId AND direction = 'in' AND status = 'pending' ORDER BY id`;

/**
 * Inbound messages of a session not yet done or failed (pending or processing), for archiving.
 * @param sessionId the session
 * @returns rows, oldest first
 */
export const OPEN_INBOUND_OF_SESSION = `
SELECT * FROM messages WHERE session_id = :sessionId AND direction = 'in' AND status IN ('pending', 'processing') ORDER BY id`;

/**
 * A runnable message taken by a new turn: one more try.
 * @param id the message
 * @param turnId the new turn
 * @returns changed rows: 1 = taken
 * @guard the caller passed the fence (the session row is locked) and read the message as
 *   pending under it; only transitions holding that row change its messages
 */
export const TAKE_MESSAGE = `
UPDATE messages SET status = 'processing', tries = tries + 1, turn_id = :turnId WHERE id = :id AND status = 'pending'`;

/**
 * A message of a committed turn is done.
 * @param id the message
 * @returns changed rows: 1 = done
 * @guard the commit passed the running-turn fence and read the message as processing under it
 */
export const FINISH_MESSAGE = `UPDATE messages SET status = 'done' WHERE id = :id AND status = 'processing'`;

/**
 * A message of an aborted turn goes back to pending, runnable after its backoff.
 * @param id the message
 * @param processAfter when it is runnable again
 * @param error why the turn ended
 * @param errorCode its catalogue code
 * @returns changed rows: 1 = back to pending
 * @guard the abort holds the session row and read the message as processing under it
 */
export const RETRY_MESSAGE = `
UPDATE messages SET status = 'pending', process_after = :processAfter, turn_id = NULL, error = :error, error_code = :errorCode
WHERE id = :id AND status = 'processing'`;

/**
 * Back to pending at once with its try given back: the worker stopped, not the turn.
 * @param id the message
 * @param now the transition's time, epoch ms
 * @param error why the turn ended
 * @param errorCode its catalogue code
 * @returns changed rows: 1 = back to pending
 * @guard the abort holds the session row and read the message as processing under it
 */
export const REQUEUE_MESSAGE = `
UPDATE messages SET status = 'pending', tries = tries - 1, process_after = :now, turn_id = NULL, error = :error, error_code = :errorCode
WHERE id = :id AND status = 'processing'`;

/**
 * A message of an aborted turn fails for good (a terminal code, or its last try).
 * @param id the message
 * @param error why the turn ended
 * @param errorCode its catalogue code
 * @returns changed rows: 1 = failed
 * @guard the abort holds the session row and read the message as processing under it
 */
export const FAIL_MESSAGE = `
UPDATE messages SET status = 'failed', error = :error, error_code = :errorCode WHERE id = :id AND status = 'processing'`;

/**
 * A message of an interrupted turn ends interrupted: its user stopped it, it is not retried.
 * @param id the message
 * @param error why the turn ended
 * @param errorCode its catalogue code (TURN_INTERRUPTED)
 * @returns changed rows: 1 = interrupted
 * @guard the abort holds the session row and read the message as processing under it
 */
export const INTERRUPT_MESSAGE = `
UPDATE messages SET status = 'interrupted', turn_id = NULL, error = :error, error_code = :errorCode
WHERE id = :id AND status = 'processing'`;

/**
 * A pending message taken back by its sender before a turn took it.
 * @param id the message
 * @returns changed rows: 1 = cancelled
 * @guard cancelMessage holds the session row (SESSION_LOCKED) and read the message as pending
 *   under it; only transitions holding that row change its messages
 */
export const CANCEL_MESSAGE = `UPDATE messages SET status = 'cancelled' WHERE id = :id AND status = 'pending'`;

/**
 * An open message of a session being archived fails.
 * @param id the message
 * @param error why
 * @param errorCode its catalogue code
 * @returns changed rows: 1 = failed
 * @guard archiving holds the session row (ARCHIVE_SESSION) and read the message as open under
 *   it, after the running turn's abort
 */
export const FAIL_OPEN_MESSAGE = `
UPDATE messages SET status = 'failed', error = :error, error_code = :errorCode WHERE id = :id AND status IN ('pending', 'processing')`;

/**
 * The messages a turn took and still holds.
 * @param turnId the turn
 * @returns rows, oldest first
 */
export const PROCESSING_OF_TURN = `SELECT * FROM messages WHERE turn_id = :turnId AND status = 'processing' ORDER BY id`;

/**
 * Counts for a session view (whether it is runnable is on its row: runnable_at).
 * @param sessionId the session
 * @returns one row (pending, last_in_status)
 */
export const SESSION_COUNTS = `
SELECT
  COUNT(*) FILTER (WHERE direction = 'in' AND status = 'pending') AS pending,
  (SELECT status FROM messages WHERE session_id = :sessionId AND direction = 'in' ORDER BY id DESC LIMIT 1) AS last_in_status
FROM messages WHERE session_id = :sessionId`;

/**
 * A session's last reply.
 * @param sessionId the session
 * @returns the row, or none
 */
export const LAST_REPLY = `
SELECT * FROM messages WHERE session_id = :sessionId AND direction = 'out' ORDER BY id DESC LIMIT 1`;

/**
 * SESSION_COUNTS for every session of a page of the listing (session-page.ts).
 * @param tenant null = every tenant
 * @param afterAt as SESSIONS_PAGE's
 * @param afterId as SESSIONS_PAGE's
 * @param limit as SESSIONS_PAGE's
 * @returns rows (session_id, pending)
 */
export const PENDING_COUNTS = `
SELECT p.id AS session_id, (
  SELECT COUNT(*) FROM messages m WHERE m.session_id = p.id AND m.direction = 'in' AND m.status = 'pending'
) AS pending
FROM (${PAGE_IDS}) p`;

/**
 * When the next pending message becomes runnable, for the claim loop's timer.
 * @param now only times after it
 * @returns one row (at: epoch ms, null when none)
 */
export const NEXT_PROCESS_AFTER = `
SELECT MIN(process_after) AS at FROM messages WHERE status = 'pending' AND process_after > :now`;
