/**
 * Every SQL statement of the stores, by name: the shared ones (statements/, one file per
 * table) and the few whose text differs between engines (DialectStatements, written by
 * each store). The shared ones are written in the subset SQLite (3.35+) and PostgreSQL
 * agree on: named parameters (:name, turned into $n for PostgreSQL), RETURNING, ON
 * CONFLICT, aggregate FILTER, and `CAST(:p AS TEXT) IS NULL` for an optional filter
 * (PostgreSQL cannot type a bare `$1 IS NULL`). Nothing outside store/ holds SQL.
 */

export * from './statements/agents.js';
export * from './statements/audit.js';
export * from './statements/channels.js';
export * from './statements/checkpoints.js';
export * from './statements/events.js';
export * from './statements/messages.js';
export * from './statements/model-usage.js';
export * from './statements/sandboxes.js';
export * from './statements/schedules.js';
export * from './statements/sessions.js';
export * from './statements/state.js';
export * from './statements/storage.js';
export * from './statements/tenant-shares.js';
export * from './statements/tokens.js';
export * from './statements/turns.js';
export * from './statements/webhooks.js';
export * from './statements/workers.js';
export * from './statements/workspace.js';

/**
 * Statements whose text differs between engines: PostgreSQL takes row locks where SQLite
 * (one writer at a time) needs none, and each engine reads JSON with its own functions.
 */
export interface DialectStatements {
  /**
   * The first session of the fair queue (FAIR_QUEUE), its row locked (rows other claims hold
   * skipped) where the engine can.
   * @param now as FAIR_QUEUE's
   * @returns one row (session_id, first_id, lease_owner, tenant, share_key, virtual_time,
   *   contenders), or none (nothing queued, or every session of the chosen tenant is being claimed)
   */
  FAIR_QUEUE_HEAD: string;
  /**
   * The first session of the free queue (FREE_QUEUE), its row locked (rows other claims hold
   * skipped) where the engine can.
   * @param now as FREE_QUEUE's
   * @returns one row (session_id, first_id, lease_owner), or none
   */
  QUEUE_HEAD: string;
  /**
   * The first session of DEAD_HELD_QUEUE, its row locked (rows others hold skipped) where the
   * engine can.
   * @param now as DEAD_HELD_QUEUE's
   * @param staleBefore now - leaseMs
   * @returns one row (session_id, first_id, lease_owner), or none
   */
  DEAD_HELD_QUEUE_HEAD: string;
  /**
   * EXPIRED_LEASES, their session rows locked (rows others hold skipped) where the engine can.
   * @param staleBefore now - leaseMs
   * @param limit at most this many
   * @returns rows (id)
   */
  EXPIRED_LEASES_LOCKED: string;
  /**
   * The fence: the session's generation and lease holder are the caller's; locks the
   * session row where the engine can, so the transition's later statements see it as read.
   * @param id the session
   * @param generation the caller's
   * @param worker the caller's
   * @returns a row when the fence holds, none when it does not
   */
  FENCE: string;
  /**
   * A session row, locked where the engine can, for a transition a client asks for that
   * changes its messages or turns (cancelMessage, requestInterrupt): it then serializes with
   * the fenced transitions of the session's worker, which lock the same row (FENCE).
   * @param id the session
   * @returns the row, or none
   */
  SESSION_LOCKED: string;
  /**
   * One delivery per live webhook that wants this event, in the event's own transaction,
   * so an event is never written without its deliveries (`webhooks.events` is a JSON
   * array, read with each engine's JSON functions).
   * @param eventId the new event
   * @param sessionId its session
   * @param type its type
   * @param now the transition's time, epoch ms
   * @returns changed rows: one per webhook that wants it (any number)
   */
  INSERT_DELIVERIES_FOR_EVENT: string;
  /**
   * The last message in one direction of every session of a page of the listing
   * (session-page.ts): its last inbound one's status, its last reply. Read by an index
   * lookup per page session (PostgreSQL: a lateral join; a plain join lets its planner
   * scan every message).
   * @param direction 'in' | 'out'
   * @param tenant null = every tenant
   * @param afterAt as SESSIONS_PAGE's
   * @param afterId as SESSIONS_PAGE's
   * @param limit as SESSIONS_PAGE's
   * @returns rows, one per session that has one
   */
  LAST_MESSAGES: string;
}
