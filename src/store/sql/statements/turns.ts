/**
 * The statements on `turns`. Written once for both engines (../statements.ts says in which
 * dialect). Each header lists the statement's parameters and what it returns; a guarded
 * one (@guard) must change exactly one row, and says why nothing else can happen
 * (statements.test.ts holds the headers to the SQL and the guards to their callers).
 */
import { afterTimeAndId } from '../keyset.js';
import { PAGE_IDS } from '../session-page.js';

/**
 * A new running turn.
 * @param id the turn
 * @param sessionId its session
 * @param attempt 1 + the most tries among its messages before
 * @param generation the fence's
 * @param worker the fence's
 * @param sandbox the session's sandbox, or null before it started
 * @param messageIds JSON array of the messages it took
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 */
export const INSERT_TURN = `
INSERT INTO turns (id, session_id, attempt, generation, worker_id, sandbox, status, message_ids, started_at)
VALUES (:id, :sessionId, :attempt, :generation, :worker, :sandbox, 'running', :messageIds, :now)`;

/**
 * The session's running turn (at most one).
 * @param sessionId the session
 * @returns the row, or none
 */
export const RUNNING_TURN_OF_SESSION = `SELECT * FROM turns WHERE session_id = :sessionId AND status = 'running'`;

/**
 * The running turns of a page of the listing's sessions (session-page.ts).
 * @param tenant null = every tenant
 * @param afterAt as SESSIONS_PAGE's
 * @param afterId as SESSIONS_PAGE's
 * @param limit as SESSIONS_PAGE's
 * @returns rows
 */
export const RUNNING_TURNS = `
SELECT t.* FROM (${PAGE_IDS}) p JOIN turns t ON t.session_id = p.id AND t.status = 'running'`;

/**
 * One turn.
 * @param id the turn
 * @returns the row, or none
 */
export const TURN_BY_ID = `SELECT * FROM turns WHERE id = :id`;

/**
 * A page of a session's turns, in the order they started (turns_session).
 * @param sessionId the session
 * @param afterAt started_at of the previous page's last row (-1: the first page)
 * @param afterId its id ('' for the first page)
 * @param limit at most this many
 * @returns rows
 */
export const TURNS_OF_SESSION = `SELECT * FROM turns WHERE session_id = :sessionId AND ${afterTimeAndId('started_at')}`;

/**
 * The running turn's latest progress text.
 * @param id the turn
 * @param text the progress
 * @returns changed rows: 1
 * @guard the caller passed the running-turn fence (the session row is locked, the turn read as
 *   running under it)
 */
export const SET_TURN_PROGRESS = `UPDATE turns SET progress = :text WHERE id = :id AND status = 'running'`;

/**
 * Its user asks for the running turn to be interrupted: from now on its commit is refused
 * and any abort of it ends it interrupted.
 * @param id the turn
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = recorded
 * @guard requestInterrupt holds the session row (SESSION_LOCKED) and read the turn as running
 *   under it
 */
export const REQUEST_INTERRUPT = `
UPDATE turns SET interrupt_requested_at = :now WHERE id = :id AND status = 'running'`;

/**
 * A running turn ends: committed, aborted or interrupted, with why.
 * @param id the turn
 * @param status committed, aborted or interrupted
 * @param error why it was aborted, or null
 * @param errorCode its catalogue code, or null
 * @param baseVersion the workspace version a committed turn ran on, or null
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = ended
 * @guard the caller holds the session row and read the turn as running under it
 */
export const END_TURN = `
UPDATE turns SET status = :status, error = :error, error_code = :errorCode, base_version = :baseVersion, ended_at = :now
WHERE id = :id AND status = 'running'`;

/**
 * Mean run time of the last committed turns, for queue ETAs.
 * @param limit how many turns
 * @returns one row (ms, null before the first)
 */
export const MEAN_TURN_MS = `
SELECT AVG(ended_at - started_at) AS ms FROM (
  SELECT started_at, ended_at FROM turns WHERE status = 'committed' ORDER BY ended_at DESC LIMIT :limit
) AS recent`;
