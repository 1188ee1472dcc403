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
 * @param controlUrl its control endpoint (http://host:port), or null
 * @param controlKey the bearer key that endpoint takes, or null
 * @returns changed rows: 1
 */
export const UPSERT_WORKER = `
INSERT INTO workers (id, host, pid, slots, heartbeat_at, started_at, control_url, control_key)
VALUES (:id, :host, :pid, :slots, :heartbeatAt, :startedAt, :controlUrl, :controlKey)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, slots = excluded.slots,
  control_url = excluded.control_url, control_key = excluded.control_key`;

/**
 * A worker's heartbeat.
 * @param id the worker
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = renewed, 0 = the row is gone (the worker must fence itself)
 */
export const RENEW_WORKER = `UPDATE workers SET heartbeat_at = :now WHERE id = :id`;

/**
 * A worker asked to drain, or beginning to: the first time counts.
 * @param id the worker
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = marked (or already draining), 0 = no such worker
 */
export const DRAIN_WORKER = `UPDATE workers SET draining_since = COALESCE(draining_since, :now) WHERE id = :id`;

/**
 * One worker's row.
 * @param id the worker
 * @returns row or none
 */
export const WORKER_BY_ID = `SELECT * FROM workers WHERE id = :id`;

/**
 * A worker's clean stop: its row goes, unless it still holds a lease (a release that failed).
 * @param id the worker
 * @returns changed rows: 1 = deleted, 0 = it holds a lease (EXPIRE_WORKER then), or the sweep
 *   deleted it already (idempotent)
 */
export const DELETE_WORKER = `
DELETE FROM workers WHERE id = :id AND NOT EXISTS (SELECT 1 FROM sessions WHERE lease_owner = :id)`;

/**
 * A worker stops while holding leases: its row stays, dead at once, so the sweep finds those
 * leases from it (EXPIRED_LEASES) and deletes it once they are cleared (DELETE_DEAD_WORKERS).
 * @param id the worker
 * @returns changed rows: 1 = expired, 0 = no such row
 */
export const EXPIRE_WORKER = `UPDATE workers SET heartbeat_at = 0 WHERE id = :id`;

/**
 * Whether the worker's own row is there and fresh. A worker claims only then: a lease taken
 * by a worker whose row is gone would have no row for the sweep to find it by, and one whose
 * row is stale would be dead at once.
 * @param id the worker
 * @param staleBefore now - leaseMs
 * @returns a row when it is, none when not
 */
export const FRESH_WORKER = `SELECT 1 AS fresh FROM workers WHERE id = :id AND heartbeat_at > :staleBefore`;

/**
 * Whether a sweep has anything to do: a worker that went stale since the caller last found
 * nothing to do and holds a lease, or a row dead long enough to delete (or holding a lease
 * still, which the sweep then reclaims). Only the rows stale since that last check are read
 * (workers_heartbeat): rows of workers that died earlier and were swept may stay for
 * 10 × leaseMs, and every worker sweeps every leaseMs / 5, so reading them all on every pass
 * would cost the fleet what its dead rows number. Rows stale before the last check held no
 * lease then, and a stale worker claims nothing (FRESH_WORKER); a claim whose transaction
 * outlived the lease could still add one, and is reclaimed when its row is deletable.
 * @param checkedUpTo staleBefore of the caller's last check that found nothing; -1 = never
 * @param staleBefore now - leaseMs
 * @param deadBefore now - 10 × leaseMs
 * @returns a row when there is, none when not
 */
export const SWEEP_DUE = `
SELECT 1 AS due FROM workers w
WHERE w.heartbeat_at <= :deadBefore
OR (w.heartbeat_at > :checkedUpTo AND w.heartbeat_at <= :staleBefore
    AND EXISTS (SELECT 1 FROM sessions s WHERE s.lease_owner = w.id))
LIMIT 1`;

/**
 * Rows of workers silent for long and holding no lease: they only clutter `berth status`.
 * From the stale rows (workers_heartbeat), each checked on sessions_lease_owner.
 * @param deadBefore now - 10 × leaseMs
 * @returns changed rows: how many went (any number)
 */
export const DELETE_DEAD_WORKERS = `
DELETE FROM workers WHERE heartbeat_at <= :deadBefore
AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.lease_owner = workers.id)`;

/**
 * The slots of the workers whose row is fresh, for queue ETAs.
 * @param staleBefore now - leaseMs
 * @returns one row (slots)
 */
export const LIVE_SLOTS = `SELECT COALESCE(SUM(slots), 0) AS slots FROM workers WHERE heartbeat_at > :staleBefore`;

/**
 * Every worker row, oldest first.
 * @returns rows
 */
export const ALL_WORKERS = `SELECT * FROM workers ORDER BY started_at`;
