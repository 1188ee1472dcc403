/**
 * The statements on `events`. Written once for both engines (../statements.ts says in
 * which dialect). Each header lists the statement's parameters and what it returns; a
 * guarded one (@guard) must change exactly one row, and says why nothing else can happen
 * (statements.test.ts holds the headers to the SQL and the guards to their callers).
 */

/**
 * A session event (SSE, webhooks).
 * @param sessionId the session
 * @param type the event type
 * @param data its JSON
 * @param now the transition's time, epoch ms
 * @returns the new row's id
 */
export const INSERT_EVENT = `
INSERT INTO events (session_id, type, data, created_at) VALUES (:sessionId, :type, :data, :now) RETURNING id`;

/**
 * One event.
 * @param id the event
 * @returns the row, or none
 */
export const EVENT_BY_ID = `SELECT * FROM events WHERE id = :id`;

/**
 * A session's events after an id, oldest first.
 * @param sessionId the session
 * @param afterId the last id seen
 * @param limit page size
 * @returns rows
 */
export const EVENTS_AFTER_OF_SESSION = `
SELECT * FROM events WHERE session_id = :sessionId AND id > :afterId ORDER BY id LIMIT :limit`;

/**
 * Every session's events after an id, oldest first.
 * @param afterId the last id seen
 * @param limit page size
 * @param tenant null = every tenant
 * @returns rows
 */
export const EVENTS_AFTER = `
SELECT e.* FROM events e
WHERE e.id > :afterId AND (CAST(:tenant AS TEXT) IS NULL OR e.session_id IN (SELECT id FROM sessions WHERE tenant = :tenant))
ORDER BY e.id LIMIT :limit`;
