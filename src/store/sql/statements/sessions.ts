/**
 * The statements on `sessions`: the claim queue, leases and their fence, archiving, the
 * workspace bookkeeping of commits. Written once for both engines (../statements.ts says
 * in which dialect). Each header lists the statement's parameters and what it returns; a
 * guarded one (@guard) must change exactly one row, and says why nothing else can happen
 * (statements.test.ts holds the headers to the SQL and the guards to their callers).
 */
import { COUNT_COLUMNS } from '../session-counts-ddl.js';
import { PAGE_FILTER } from '../session-page.js';

/**
 * The free part of the claim queue: sessions nobody holds with a runnable pending inbound
 * message, in claim order (FIFO by oldest pending inbound message). Read on sessions_queue,
 * whose entries are the unleased sessions with a pending message, by queue key.
 * @param now runnable = runnable_at <= now
 * @returns rows (session_id, first_id, lease_owner, tenant), queue order
 */
export const FREE_QUEUE = `
SELECT id AS session_id, queued_id AS first_id, lease_owner, tenant FROM sessions
WHERE lease_owner IS NULL AND queued_id IS NOT NULL AND runnable_at <= :now
ORDER BY queued_id`;

/**
 * The free queue of the tenant whose turn it is (start-time fair queuing, ../fair-order.ts):
 * the tenant with a runnable free session whose share key, max(its pass, the virtual time),
 * is smallest, ties to the older head; its sessions FIFO. One indexed lookup per tenant
 * (sessions_tenant_queue) picks the tenant, then its part of the queue is read in order.
 * @param now runnable = runnable_at <= now
 * @returns rows (session_id, first_id, lease_owner, tenant, share_key, virtual_time,
 *   contenders: how many tenants have runnable free sessions), queue order
 */
export const FAIR_QUEUE = `
SELECT s.id AS session_id, s.queued_id AS first_id, s.lease_owner, s.tenant, f.share_key, f.virtual_time, f.contenders
FROM (
  SELECT tenant, share_key, virtual_time, COUNT(*) OVER () AS contenders FROM (
    SELECT t.tenant, v.virtual_time,
      CASE WHEN t.pass > v.virtual_time THEN t.pass ELSE v.virtual_time END AS share_key,
      (SELECT q.queued_id FROM sessions q
       WHERE q.tenant = t.tenant AND q.lease_owner IS NULL AND q.queued_id IS NOT NULL AND q.runnable_at <= :now
       ORDER BY q.queued_id LIMIT 1) AS head
    FROM tenant_shares t, (SELECT MAX(last_start) AS virtual_time FROM tenant_shares) v
  ) c WHERE head IS NOT NULL ORDER BY share_key, head LIMIT 1
) f JOIN sessions s ON s.tenant = f.tenant
WHERE s.lease_owner IS NULL AND s.queued_id IS NOT NULL AND s.runnable_at <= :now
ORDER BY s.queued_id`;

/**
 * The rest of the claim queue: sessions with a runnable pending inbound message whose lease
 * holder is dead (its row stale) and not yet swept, in claim order. Found from the stale
 * worker rows (workers_heartbeat), so it costs what the dead workers hold, not the table.
 * @param now runnable = runnable_at <= now
 * @param staleBefore now - leaseMs: a holder whose heartbeat is not after it is dead
 * @returns rows (session_id, first_id, lease_owner, tenant), queue order
 */
export const DEAD_HELD_QUEUE = `
SELECT s.id AS session_id, s.queued_id AS first_id, s.lease_owner, s.tenant FROM workers w
JOIN sessions s ON s.lease_owner = w.id
WHERE w.heartbeat_at <= :staleBefore AND s.queued_id IS NOT NULL AND s.runnable_at <= :now
ORDER BY s.queued_id`;

/** QUEUED_BEFORE's count of the queue entries below the key `before` (an expression). */
const queuedBefore = (before: string) => `
  (SELECT COUNT(*) FROM sessions
   WHERE lease_owner IS NULL AND queued_id IS NOT NULL AND runnable_at <= :now AND queued_id < ${before})
  + (SELECT COUNT(*) FROM workers w JOIN sessions s ON s.lease_owner = w.id
     WHERE w.heartbeat_at <= :staleBefore AND s.queued_id < ${before} AND s.runnable_at <= :now)`;

/**
 * How many queued sessions (FREE_QUEUE and DEAD_HELD_QUEUE) come before a queue key: a
 * session's position is one more. A count of index entries (sessions_queue), no grouping.
 * @param before a queue key (the session's queued_id); above every key = the whole queue
 * @param now runnable = runnable_at <= now
 * @param staleBefore now - leaseMs
 * @returns one row (n)
 */
export const QUEUED_BEFORE = `SELECT ${queuedBefore(':before')} AS n`;

/**
 * Each tenant's part of the claim queue (FREE_QUEUE and DEAD_HELD_QUEUE) counted, whole and
 * before a queue key: what a session's place in the fair share needs (fairPosition), read
 * from sessions_tenant_queue without listing the queue.
 * @param before a queue key (the session's queued_id)
 * @param now runnable = runnable_at <= now
 * @param staleBefore now - leaseMs
 * @returns rows (tenant, n, ahead), one per tenant with queued sessions
 */
export const QUEUE_COUNTS = `
SELECT tenant, COUNT(*) AS n, COUNT(*) FILTER (WHERE first_id < :before) AS ahead FROM (
  SELECT tenant, queued_id AS first_id FROM sessions
  WHERE lease_owner IS NULL AND queued_id IS NOT NULL AND runnable_at <= :now
  UNION ALL
  SELECT s.tenant, s.queued_id FROM workers w JOIN sessions s ON s.lease_owner = w.id
  WHERE w.heartbeat_at <= :staleBefore AND s.queued_id IS NOT NULL AND s.runnable_at <= :now
) q GROUP BY tenant`;

/**
 * A page of one tenant's part of the claim queue (FREE_QUEUE and DEAD_HELD_QUEUE), FIFO by
 * first message (its order within the fair share), on sessions_tenant_queue, with how many
 * messages each has pending.
 * @param tenant the tenant
 * @param afterFirst only sessions whose first pending message is after this id (0: all)
 * @param skip then this many of its oldest left out (the tenant's part of earlier pages)
 * @param limit at most this many
 * @param now runnable = runnable_at <= now
 * @param staleBefore now - leaseMs
 * @returns rows (session_id, first_id, tenant, pending), queue order
 */
export const QUEUE_OF_TENANT = `
SELECT q.session_id, q.first_id, q.tenant, (
  SELECT COUNT(*) FROM messages m WHERE m.session_id = q.session_id AND m.direction = 'in' AND m.status = 'pending'
) AS pending FROM (
  SELECT id AS session_id, queued_id AS first_id, tenant FROM sessions
  WHERE tenant = :tenant AND lease_owner IS NULL AND queued_id IS NOT NULL AND queued_id > :afterFirst AND runnable_at <= :now
  UNION ALL
  SELECT s.id, s.queued_id, s.tenant FROM workers w JOIN sessions s ON s.lease_owner = w.id
  WHERE w.heartbeat_at <= :staleBefore AND s.tenant = :tenant AND s.queued_id > :afterFirst AND s.runnable_at <= :now
) q ORDER BY q.first_id LIMIT :limit OFFSET :skip`;

/**
 * A new pending inbound message puts its session in the queue, or keeps the earlier place it
 * has: the keys move only when it is the oldest pending message (then it is due now);
 * behind an older pending one, that one's due time stays the session's (a message in backoff
 * holds the ones after it). Written from the row as it is when the update runs, so a
 * transition that recomputed the keys meanwhile (RECOMPUTE_QUEUE_KEYS, under the row lock,
 * which cannot see this message before it commits) is not undone. A held session stays out
 * of the queue: its message waits with the others.
 * @param id the session
 * @param messageId the new message
 * @param now its process_after
 * @returns changed rows: 1
 * @guard the message was just inserted into this session (its foreign key holds the row)
 */
export const QUEUE_NEW_MESSAGE = `
UPDATE sessions SET
  queued_id = CASE WHEN held_at IS NOT NULL THEN NULL WHEN queued_id IS NULL OR queued_id > :messageId THEN :messageId ELSE queued_id END,
  runnable_at = CASE WHEN held_at IS NOT NULL THEN NULL WHEN queued_id IS NULL OR queued_id > :messageId THEN :now ELSE runnable_at END
WHERE id = :id`;

/**
 * The session's queue keys from its pending inbound messages, after a transition took,
 * retried, requeued or failed some: queued_id its oldest, runnable_at when that one is due
 * (the messages after it wait for it); both null when none is pending, or while the session
 * is held (it is out of the queue until an operator acts).
 * @param id the session
 * @returns changed rows: 1
 * @guard the caller holds the session row (fence, claim, sweep or archiving), which every
 *   transition changing its messages' status takes first
 */
export const RECOMPUTE_QUEUE_KEYS = `
UPDATE sessions SET
  queued_id = CASE WHEN held_at IS NULL THEN
    (SELECT MIN(id) FROM messages WHERE session_id = :id AND direction = 'in' AND status = 'pending') END,
  runnable_at = CASE WHEN held_at IS NULL THEN (SELECT process_after FROM messages WHERE id = (
    SELECT MIN(id) FROM messages WHERE session_id = :id AND direction = 'in' AND status = 'pending')) END
WHERE id = :id`;

/**
 * Sessions leased by a worker whose row is stale, a batch at a time. Every lease holder has
 * a row (a worker that stops while holding leases leaves its row expired, EXPIRE_WORKER, and
 * a worker claims only while its row is fresh), so they are found from the stale rows
 * (workers_heartbeat), not by reading every leased session.
 * @param staleBefore now - leaseMs
 * @param limit at most this many
 * @returns rows (id), by id
 */
export const EXPIRED_LEASES = `
SELECT s.id FROM workers w JOIN sessions s ON s.lease_owner = w.id
WHERE w.heartbeat_at <= :staleBefore
ORDER BY s.id LIMIT :limit`;

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
 * @guard the caller holds the session row (QUEUE_HEAD or DEAD_HELD_QUEUE_HEAD) and read
 *   `generation` under it, so nothing can have moved it
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
 * One page of a tenant's sessions, oldest first (session-page.ts).
 * @param tenant null = every tenant
 * @param afterAt created_at of the previous page's last session (-1: the first page)
 * @param afterId its id ('' for the first page)
 * @param limit at most this many
 * @returns rows
 */
export const SESSIONS_PAGE = `SELECT * FROM sessions WHERE ${PAGE_FILTER}`;

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
 * @guard the caller holds the session row (EXPIRED_LEASES_LOCKED or DEAD_HELD_QUEUE_HEAD) and
 *   read the holder under it
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

/**
 * This data dir takes the session's resident workspace (nobody held it): it is named as its
 * holder from now on. Its marker is already on its disk.
 * @param id the session
 * @param generation the fence's
 * @param worker the fence's
 * @param holder the data dir's id
 * @param holderName the data dir as people know it (host:path)
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = recorded
 * @guard the caller passed the fence (FENCE) in this transaction, which locks the row
 */
export const RECORD_RESIDENT_HOLDER = `
UPDATE sessions SET resident_holder = :holder, resident_holder_name = :holderName, resident_written_at = :now, updated_at = :now
WHERE id = :id AND generation = :generation AND lease_owner = :worker`;

/**
 * A resident turn committed: it wrote the workspace its holder keeps, now.
 * @param id the session
 * @param holder the data dir the turn ran on
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 * @guard the commit passed the fence (FENCE), which locks the row; the turn's worker checked
 *   the holder under this lease before the turn ran, and only a held session (which runs no
 *   turn) can have it reset
 */
export const RECORD_RESIDENT_WRITE = `
UPDATE sessions SET resident_written_at = :now WHERE id = :id AND resident_holder = :holder`;

/**
 * The resident workspace was captured into the chain at the session's current version.
 * @param id the session
 * @param version the workspace version the capture was taken after
 * @param holder the data dir it was taken on
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = recorded
 * @guard the caller passed the fence (FENCE) in this transaction, which locks the row, and
 *   read the version and the holder under it
 */
export const RECORD_RESIDENT_CAPTURE = `
UPDATE sessions SET resident_captured_version = :version, resident_captured_at = :now, updated_at = :now
WHERE id = :id AND workspace_version = :version AND resident_holder = :holder`;

/**
 * The session is held: out of the claim queue until an operator acts (RECOMPUTE_QUEUE_KEYS
 * keeps its keys null from now on).
 * @param id the session
 * @param code the catalogue code of why
 * @param error the message of why
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 * @guard the caller holds the session row (the abort of its running turn)
 */
export const HOLD_SESSION = `
UPDATE sessions SET held_at = :now, held_code = :code, held_error = :error, updated_at = :now WHERE id = :id`;

/**
 * An operator lets a held session go on (resume, or reset its workspace first).
 * @param id the session
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = released, 0 = it was not held (SESSION_NOT_HELD)
 */
export const RELEASE_HOLD = `
UPDATE sessions SET held_at = NULL, held_code = NULL, held_error = NULL, updated_at = :now
WHERE id = :id AND held_at IS NOT NULL`;

/**
 * The operator accepts the loss of the resident workspace: nobody holds it, and a marker of
 * an older epoch (files given up) is emptied by whichever data dir takes it next.
 * @param id the session
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 * @guard the caller released the session's hold in this transaction (RELEASE_HOLD), so the row exists
 */
export const RESET_RESIDENT_WORKSPACE = `
UPDATE sessions SET resident_holder = NULL, resident_holder_name = NULL, resident_written_at = NULL,
  resident_captured_version = NULL, resident_captured_at = NULL, resident_epoch = resident_epoch + 1, updated_at = :now
WHERE id = :id`;

/**
 * The counts the store keeps (session_counts, kept by triggers), summed over the shards of
 * one tenant or of every tenant.
 * @param tenant null = every tenant
 * @returns one row, one column per count (null when nothing was ever counted)
 */
export const KEPT_COUNTS = `
SELECT ${COUNT_COLUMNS.map((c) => `SUM(${c}) AS ${c}`).join(', ')}
FROM session_counts WHERE CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant`;
