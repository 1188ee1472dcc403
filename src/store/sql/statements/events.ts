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
 * A session's events in a time range, oldest first (a turn's timeline: its tries' span).
 * @param sessionId the session
 * @param since epoch ms, inclusive
 * @param until epoch ms, inclusive, or null (no end: a try still runs)
 * @param limit page size
 * @returns rows
 */
export const EVENTS_OF_SESSION_BETWEEN = `
SELECT * FROM events
WHERE session_id = :sessionId AND created_at >= :since AND (CAST(:until AS BIGINT) IS NULL OR created_at <= :until)
ORDER BY id LIMIT :limit`;

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

/**
 * The event log as the API's change feed reads it: every session's events in an id range,
 * oldest first, each with its session's tenant (null when no such session).
 * @param afterId the range starts after this id
 * @param upToId the range ends at this id, inclusive
 * @param limit page size
 * @returns rows (the event's columns and tenant)
 */
export const EVENT_LOG = `
SELECT e.*, s.tenant AS tenant FROM events e LEFT JOIN sessions s ON s.id = e.session_id
WHERE e.id > :afterId AND e.id <= :upToId
ORDER BY e.id LIMIT :limit`;

/**
 * The newest event id (allocated and committed): where a change feed starts.
 * @returns one row (id), null when there is no event
 */
export const LAST_EVENT_ID = `SELECT MAX(id) AS id FROM events`;
