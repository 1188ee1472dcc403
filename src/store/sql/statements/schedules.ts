/**
 * The statements on `schedules`. Written once for both engines (../statements.ts says in
 * which dialect). Each header lists the statement's parameters and what it returns; a
 * guarded one (@guard) must change exactly one row, and says why nothing else can happen
 * (statements.test.ts holds the headers to the SQL and the guards to their callers).
 */

import { afterTimeAndId } from '../keyset.js';

/**
 * A new active schedule.
 * @param id the schedule
 * @param sessionId where its runs go
 * @param agent creates the session at the first run, or null
 * @param tenant the session's (or its agent's)
 * @param cron five fields or a macro
 * @param tz IANA zone
 * @param message text of each run
 * @param missed once or skip
 * @param nextRunAt its first due time
 * @param createdByTurn the turn that made it, or null (the API)
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 */
export const INSERT_SCHEDULE = `
INSERT INTO schedules (id, session_id, agent, tenant, cron, tz, message, missed, status, next_run_at, created_by_turn, created_at, updated_at)
VALUES (:id, :sessionId, :agent, :tenant, :cron, :tz, :message, :missed, 'active', :nextRunAt, :createdByTurn, :now, :now)`;

/**
 * Live (not cancelled) schedules the agent's own turns made, over all its sessions: what its
 * cap counts.
 * @param agent the agent
 * @returns one row (n)
 */
export const AGENT_MADE_SCHEDULES = `
SELECT COUNT(*) AS n FROM schedules s JOIN sessions x ON x.id = s.session_id
WHERE x.agent = :agent AND s.created_by_turn IS NOT NULL AND s.status <> 'cancelled'`;

/**
 * One schedule.
 * @param id the schedule
 * @returns the row, or none
 */
export const SCHEDULE_BY_ID = `SELECT * FROM schedules WHERE id = :id`;

/**
 * A page of the schedules of one session (or all) of one tenant (or all).
 * @param sessionId null = every session
 * @param tenant null = every tenant
 * @param afterAt created_at of the previous page's last row (-1: the first page)
 * @param afterId its id ('' for the first page)
 * @param limit at most this many
 * @returns rows, oldest first
 */
export const SCHEDULES = `
SELECT * FROM schedules
WHERE (CAST(:sessionId AS TEXT) IS NULL OR session_id = :sessionId) AND (CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant)
  AND ${afterTimeAndId('created_at')}`;

/**
 * Active schedules due by now.
 * @param now due = next_run_at <= now
 * @returns rows, soonest first
 */
export const DUE_SCHEDULES = `
SELECT * FROM schedules WHERE status = 'active' AND next_run_at <= :now ORDER BY next_run_at, id`;

/**
 * Pause, resume or cancel.
 * @param id the schedule
 * @param status active, paused or cancelled
 * @param nextRunAt next due time, null when cancelled
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = moved, 0 = it was cancelled since the caller read it (a concurrent
 *   cancel on PostgreSQL): SCHEDULE_CANCELLED
 */
export const MOVE_SCHEDULE = `
UPDATE schedules SET status = :status, next_run_at = :nextRunAt, updated_at = :now
WHERE id = :id AND status != 'cancelled'`;

/**
 * A due run handled: compare-and-set on the due time, so it is handled once.
 * @param id the schedule
 * @param dueAt the next_run_at read
 * @param nextRunAt its next due time
 * @param fired 1 = sent, 0 = skipped
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = this caller handles the run, 0 = another process handled it first
 *   (the caller does nothing)
 */
export const ADVANCE_SCHEDULE = `
UPDATE schedules SET next_run_at = :nextRunAt, runs = runs + :fired,
  last_run_at = CASE WHEN :fired = 1 THEN :now ELSE last_run_at END, updated_at = :now
WHERE id = :id AND status = 'active' AND next_run_at = :dueAt`;
