/**
 * The statements on `sandboxes`: each sandbox's record as its worker last reported it
 * (phase, binding, turn, why it ended). Written once for both engines (../statements.ts
 * says in which dialect). Each header lists the statement's parameters and what it returns.
 */

/**
 * A sandbox's record, the latest report winning (a report older than the row is ignored).
 * @param name the sandbox
 * @param workerId its worker
 * @param phase its lifecycle phase
 * @param pooled 1 = started unbound for the warm pool
 * @param sessionId the session it is bound to, or null
 * @param generation that binding's generation, or null
 * @param turnId the turn it serves, or null
 * @param endReason why it ended, or null
 * @param endMessage the human account of it, or null
 * @param createdAt epoch ms
 * @param updatedAt epoch ms of the move reported
 * @param endedAt epoch ms it was gone, or null
 * @returns changed rows: 1, or 0 for a stale report
 */
export const UPSERT_SANDBOX = `
INSERT INTO sandboxes (name, worker_id, phase, pooled, session_id, generation, turn_id, end_reason, end_message, created_at, updated_at, ended_at)
VALUES (:name, :workerId, :phase, :pooled, :sessionId, :generation, :turnId, :endReason, :endMessage, :createdAt, :updatedAt, :endedAt)
ON CONFLICT (name) DO UPDATE SET
  phase = excluded.phase, session_id = excluded.session_id, generation = excluded.generation,
  turn_id = excluded.turn_id, end_reason = excluded.end_reason, end_message = excluded.end_message,
  updated_at = excluded.updated_at, ended_at = excluded.ended_at
WHERE sandboxes.updated_at <= excluded.updated_at`;

/**
 * Sandboxes whose worker is dead (its row missing, or older than a lease) and that it never
 * recorded gone: a dead worker's sandboxes are killed by its own self-fence or by the
 * clean-up of the next worker on its machine, so they are recorded gone, lost with it. A
 * report the worker makes later (it was only cut off) is newer and wins.
 * @param staleBefore now - leaseMs
 * @param now epoch ms
 * @returns changed rows: how many (any number)
 */
export const END_SANDBOXES_OF_DEAD_WORKERS = `
UPDATE sandboxes SET phase = 'gone', end_reason = 'WorkerLost',
  end_message = 'its worker died (no lease renewal for a lease)', updated_at = :now, ended_at = :now
WHERE phase <> 'gone' AND worker_id NOT IN (SELECT id FROM workers WHERE heartbeat_at > :staleBefore)`;

/**
 * Records kept no longer: gone before `endedBefore`, or never ended by a worker that has no
 * row any more (it never came back) and silent since `endedBefore`.
 * @param endedBefore epoch ms
 * @returns changed rows: how many went (any number)
 */
export const DELETE_OLD_SANDBOXES = `
DELETE FROM sandboxes WHERE (phase = 'gone' AND ended_at < :endedBefore)
OR (updated_at < :endedBefore AND worker_id NOT IN (SELECT id FROM workers))`;

/**
 * Every sandbox not gone, and those gone since `endedSince`, newest first; a tenant sees only
 * its sessions' sandboxes (a warm one serves no tenant yet).
 * @param tenant the tenant, or null for all (warm sandboxes included)
 * @param endedSince epoch ms
 * @param limit at most this many
 * @returns rows
 */
export const LIST_SANDBOXES = `
SELECT b.* FROM sandboxes b LEFT JOIN sessions s ON s.id = b.session_id
WHERE (b.phase <> 'gone' OR b.ended_at >= :endedSince)
AND (CAST(:tenant AS TEXT) IS NULL OR s.tenant = :tenant)
ORDER BY b.created_at DESC LIMIT :limit`;

/**
 * The sandbox a session's lease holds now, with its worker's control endpoint and heartbeat:
 * where the API sends an operation on the live sandbox. The lease (worker, generation,
 * sandbox name) is written in the claim's transaction; the sandbox's record comes with its
 * worker's next report (within a second), so a record not there yet is no refusal (phase
 * null), while a record draining or gone is: nothing live is bound.
 * @param sessionId the session
 * @returns row or none
 */
export const LIVE_SANDBOX_OF_SESSION = `
SELECT s.sandbox AS name, s.lease_owner AS worker_id, s.generation, b.phase,
  w.control_url, w.control_key, w.heartbeat_at
FROM sessions s
LEFT JOIN sandboxes b ON b.name = s.sandbox
LEFT JOIN workers w ON w.id = s.lease_owner
WHERE s.id = :sessionId AND s.lease_owner IS NOT NULL AND s.sandbox IS NOT NULL
AND (b.phase IS NULL OR b.phase NOT IN ('draining', 'gone'))`;
