/**
 * The statements on `sessions`: the claim queue, leases and their fence, archiving, the
 * workspace bookkeeping of commits. Written once for both engines (../statements.ts says
 * in which dialect). Each header lists the statement's parameters and what it returns; a
 * guarded one (@guard) must change exactly one row, and says why nothing else can happen
 * (statements.test.ts holds the headers to the SQL and the guards to their callers).
 */

/**
 * The claim queue: sessions with a runnable inbound message and no live lease holder, in claim
 * order (FIFO by oldest runnable message).
 * @param now runnable = pending with process_after <= now
 * @param staleBefore now - leaseMs: a holder whose heartbeat is not after it is dead
 * @returns rows (session_id, first_id, lease_owner), queue order
 */
export const QUEUE = `
WITH firsts AS (
  SELECT session_id, MIN(id) AS first_id FROM messages
  WHERE status = 'pending' AND direction = 'in' AND process_after <= :now
  GROUP BY session_id
)
SELECT f.session_id, f.first_id, s.lease_owner FROM firsts f
JOIN sessions s ON s.id = f.session_id
LEFT JOIN workers w ON w.id = s.lease_owner
WHERE s.lease_owner IS NULL OR w.id IS NULL OR w.heartbeat_at <= :staleBefore
ORDER BY f.first_id`;

/**
 * Sessions leased by a worker whose row is missing or stale.
 * @param staleBefore now - leaseMs
 * @returns rows (id), by id
 */
export const EXPIRED_LEASES = `
SELECT s.id FROM sessions s LEFT JOIN workers w ON w.id = s.lease_owner
WHERE s.lease_owner IS NOT NULL AND (w.id IS NULL OR w.heartbeat_at <= :staleBefore)
ORDER BY s.id`;

/**
 * The lease of one session as it is now: its holder and whether the holder's row is fresh.
 * Re-read after the row lock was taken, so a decision never rests on a row version another
 * transaction replaced meanwhile.
 * @param id the session
 * @param staleBefore now - leaseMs
 * @returns one row (lease_owner, generation, holder_alive 1|0), or none
 */
export const SESSION_LEASE = `
SELECT s.lease_owner, s.generation, CASE WHEN w.id IS NOT NULL AND w.heartbeat_at > :staleBefore THEN 1 ELSE 0 END AS holder_alive
FROM sessions s LEFT JOIN workers w ON w.id = s.lease_owner WHERE s.id = :id`;

/**
 * Compare-and-set claim: the session is leased to the worker under the next generation, its
 * sandbox forgotten.
 * @param id the session
 * @param generation the generation read under the row lock
 * @param worker the claiming worker
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = claimed
 * @guard the caller holds the session row (QUEUE_HEAD) and read `generation` under it, so
 *   nothing can have moved it
 */
export const CLAIM_SESSION = `
UPDATE sessions SET lease_owner = :worker, generation = generation + 1, sandbox = NULL, updated_at = :now
WHERE id = :id AND generation = :generation`;

/**
 * One session.
 * @param id the session
 * @returns the row, or none
 */
export const SESSION_BY_ID = `SELECT * FROM sessions WHERE id = :id`;

/**
 * Every session of a tenant, oldest first.
 * @param tenant null = every tenant
 * @returns rows
 */
export const ALL_SESSIONS = `
SELECT * FROM sessions WHERE (CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant) ORDER BY created_at, id`;

/**
 * A new session. Two first messages of one new session may race: the second insert does
 * nothing.
 * @param id the session
 * @param agent its agent, fixed for its life
 * @param tenant its agent's tenant
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = created, 0 = it exists already (the caller decides:
 *   SESSION_EXISTS, or enqueue into it)
 */
export const INSERT_SESSION = `
INSERT INTO sessions (id, agent, tenant, created_at, updated_at) VALUES (:id, :agent, :tenant, :now, :now)
ON CONFLICT (id) DO NOTHING`;

/**
 * A fork starts at its source's workspace version.
 * @param id the new session
 * @param version the source's workspace version
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 */
export const SET_WORKSPACE_VERSION = `UPDATE sessions SET workspace_version = :version, updated_at = :now WHERE id = :id`;

/**
 * Asks for the resident sandbox to be replaced between turns.
 * @param id the session
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = asked, 0 = the session is archived (SESSION_ARCHIVED)
 */
export const REQUEST_RECYCLE = `UPDATE sessions SET recycle_requested_at = :now, updated_at = :now WHERE id = :id AND archived_at IS NULL`;

/**
 * Stop and archive: the lease is cleared and the generation bumped, so whatever sandbox serves
 * the session is fenced off (its writes get `stale`).
 * @param id the session
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = archived now, 0 = archived already (archiving is idempotent)
 */
export const ARCHIVE_SESSION = `
UPDATE sessions SET archived_at = :now, lease_owner = NULL, sandbox = NULL, generation = generation + 1, updated_at = :now
WHERE id = :id AND archived_at IS NULL`;

/**
 * Whether a session that is not archived uses the agent (it may not be deleted then).
 * @param agent the agent
 * @returns a row when there is one
 */
export const LIVE_SESSION_OF_AGENT = `SELECT 1 FROM sessions WHERE agent = :agent AND archived_at IS NULL LIMIT 1`;

/**
 * The sandbox now serving the session.
 * @param id the session
 * @param generation the fence's
 * @param worker the fence's
 * @param sandbox its name
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = recorded
 * @guard the caller passed the fence (FENCE) in this transaction, which locks the row
 */
export const RECORD_SANDBOX = `
UPDATE sessions SET sandbox = :sandbox, updated_at = :now
WHERE id = :id AND generation = :generation AND lease_owner = :worker`;

/**
 * Gives the session up: lease and sandbox cleared.
 * @param id the session
 * @param generation the fence's
 * @param worker the fence's
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = released
 * @guard the caller passed the fence (FENCE) in this transaction, which locks the row
 */
export const RELEASE_SESSION = `
UPDATE sessions SET lease_owner = NULL, sandbox = NULL, updated_at = :now
WHERE id = :id AND generation = :generation AND lease_owner = :worker`;

/**
 * Takes the lease from a dead holder (the sweep, or a claim finding it dead).
 * @param id the session
 * @param holder the dead holder, as SESSION_LEASE read it
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = cleared
 * @guard the caller holds the session row (EXPIRED_LEASES_LOCKED or QUEUE_HEAD) and read the
 *   holder under it
 */
export const CLEAR_LEASE = `UPDATE sessions SET lease_owner = NULL, sandbox = NULL, updated_at = :now WHERE id = :id AND lease_owner = :holder`;

/**
 * A commit's workspace bookkeeping: the turn's layer is owed a promotion, and the workspace is
 * one version further.
 * @param id the session
 * @param turnId the committing turn
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 * @guard the commit passed the fence (FENCE), which locks the row
 */
export const SET_PENDING_LAYER = `
UPDATE sessions SET pending_layer = :turnId, workspace_version = workspace_version + 1, updated_at = :now WHERE id = :id`;

/**
 * Promotion done: nothing is owed for this turn any more.
 * @param id the session
 * @param turnId the promoted turn
 * @returns changed rows: 1 = it was owed, 0 = already cleared or another turn is owed
 *   (idempotent: whoever promoted the layer, this worker or a later owner, may call it)
 */
export const CLEAR_PENDING_LAYER = `UPDATE sessions SET pending_layer = NULL WHERE id = :id AND pending_layer = :turnId`;
