/**
 * The statements on `workers`: their rows and heartbeats. Written once for both engines
 * (../statements.ts says in which dialect). Each header lists the statement's parameters
 * and what it returns; a guarded one (@guard) must change exactly one row, and says why
 * nothing else can happen (statements.test.ts holds the headers to the SQL and the guards
 * to their callers).
 */

/**
 * A worker's row at its start (a restart with the same id keeps started_at).
 * @param id the worker
 * @param host its hostname
 * @param pid its process
 * @param slots its capacity
 * @param heartbeatAt epoch ms
 * @param startedAt epoch ms
 * @returns changed rows: 1
 */
export const UPSERT_WORKER = `
INSERT INTO workers (id, host, pid, slots, heartbeat_at, started_at)
VALUES (:id, :host, :pid, :slots, :heartbeatAt, :startedAt)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, slots = excluded.slots`;

/**
 * A worker's heartbeat.
 * @param id the worker
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = renewed, 0 = the row is gone (the worker must fence itself)
 */
export const RENEW_WORKER = `UPDATE workers SET heartbeat_at = :now WHERE id = :id`;

/**
 * A worker's clean stop.
 * @param id the worker
 * @returns changed rows: 1 = deleted, 0 = the sweep deleted it already (idempotent)
 */
export const DELETE_WORKER = `DELETE FROM workers WHERE id = :id`;

/**
 * Rows of workers silent for long and holding no lease: they only clutter `berth status`.
 * @param deadBefore now - 10 × leaseMs
 * @returns changed rows: how many went (any number)
 */
export const DELETE_DEAD_WORKERS = `
DELETE FROM workers WHERE heartbeat_at <= :deadBefore AND id NOT IN (SELECT lease_owner FROM sessions WHERE lease_owner IS NOT NULL)`;

/**
 * Every worker row, oldest first.
 * @returns rows
 */
export const ALL_WORKERS = `SELECT * FROM workers ORDER BY started_at`;
