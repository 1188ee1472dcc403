/**
 * The SQL both stores share, one named statement each, written in the subset SQLite
 * (3.35+) and PostgreSQL agree on: named parameters (:name, turned into $n for
 * PostgreSQL), RETURNING, ON CONFLICT, aggregate FILTER, and `CAST(:p AS TEXT) IS NULL`
 * for an optional filter (PostgreSQL cannot type a bare `$1 IS NULL`). The few statements whose text
 * differs (row locks) are declared in DialectStatements and written by each store.
 * Nothing outside store/ holds SQL.
 */

/**
 * The claim queue: sessions with a runnable inbound message and no live lease holder,
 * in claim order (FIFO by oldest runnable message). Params: now, staleBefore
 * (now - leaseMs). Returns session_id, first_id, lease_owner.
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

/** Sessions leased by a worker whose row is missing or stale. Params: staleBefore. */
export const EXPIRED_LEASES = `
SELECT s.id FROM sessions s LEFT JOIN workers w ON w.id = s.lease_owner
WHERE s.lease_owner IS NOT NULL AND (w.id IS NULL OR w.heartbeat_at <= :staleBefore)
ORDER BY s.id`;

/**
 * The lease of one session as it is now: holder and whether the holder's row is fresh.
 * Re-read after a row lock was taken, so a decision never rests on a row version another
 * transaction replaced meanwhile. Params: id, staleBefore.
 */
export const SESSION_LEASE = `
SELECT s.lease_owner, s.generation, CASE WHEN w.id IS NOT NULL AND w.heartbeat_at > :staleBefore THEN 1 ELSE 0 END AS holder_alive
FROM sessions s LEFT JOIN workers w ON w.id = s.lease_owner WHERE s.id = :id`;

/** Compare-and-set claim. Params: id, generation (the one read), worker, now. 1 row = claimed. */
export const CLAIM_SESSION = `
UPDATE sessions SET lease_owner = :worker, generation = generation + 1, sandbox = NULL, updated_at = :now
WHERE id = :id AND generation = :generation`;

export const SESSION_BY_ID = `SELECT * FROM sessions WHERE id = :id`;
/** Params: tenant (null = every tenant). */
export const ALL_SESSIONS = `
SELECT * FROM sessions WHERE (CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant) ORDER BY created_at, id`;
/** Two first messages of one new session may race: the second insert does nothing. */
export const INSERT_SESSION = `
INSERT INTO sessions (id, agent, tenant, created_at, updated_at) VALUES (:id, :agent, :tenant, :now, :now)
ON CONFLICT (id) DO NOTHING`;
/**
 * Stop and archive: the lease is cleared and the generation bumped, so whatever sandbox
 * serves the session is fenced off (its writes get 'stale'). Params: id, now. 1 row = archived now.
 */
/** Params: id, now. */
export const REQUEST_RECYCLE = `UPDATE sessions SET recycle_requested_at = :now, updated_at = :now WHERE id = :id AND archived_at IS NULL`;
export const ARCHIVE_SESSION = `
UPDATE sessions SET archived_at = :now, lease_owner = NULL, sandbox = NULL, generation = generation + 1, updated_at = :now
WHERE id = :id AND archived_at IS NULL`;
/** Inbound messages not yet done of a session being archived. Params: sessionId. */
export const OPEN_INBOUND_OF_SESSION = `
SELECT * FROM messages WHERE session_id = :sessionId AND direction = 'in' AND status IN ('pending', 'processing') ORDER BY id`;
export const FAIL_OPEN_MESSAGE = `
UPDATE messages SET status = 'failed', error = :error, error_code = :errorCode WHERE id = :id AND status IN ('pending', 'processing')`;
/** Params: sessionId. 1 row = a session not archived uses the agent. */
export const LIVE_SESSION_OF_AGENT = `SELECT 1 FROM sessions WHERE agent = :agent AND archived_at IS NULL LIMIT 1`;
export const RECORD_SANDBOX = `
UPDATE sessions SET sandbox = :sandbox, updated_at = :now
WHERE id = :id AND generation = :generation AND lease_owner = :worker`;
export const RELEASE_SESSION = `
UPDATE sessions SET lease_owner = NULL, sandbox = NULL, updated_at = :now
WHERE id = :id AND generation = :generation AND lease_owner = :worker`;
export const CLEAR_LEASE = `UPDATE sessions SET lease_owner = NULL, sandbox = NULL, updated_at = :now WHERE id = :id`;

/** A deleted agent's name can be taken again. Params: name, spec, tenant, now. 1 row = created. */
export const INSERT_AGENT = `
INSERT INTO agents (name, spec, tenant, created_at) VALUES (:name, :spec, :tenant, :now)
ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, tenant = excluded.tenant, created_at = excluded.created_at, deleted_at = NULL
WHERE agents.deleted_at IS NOT NULL`;
/** Live agents only. */
export const AGENT_BY_NAME = `SELECT * FROM agents WHERE name = :name AND deleted_at IS NULL`;
/** Params: tenant (null = every tenant). */
export const ALL_AGENTS = `
SELECT * FROM agents WHERE deleted_at IS NULL AND (CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant) ORDER BY name`;
export const REPLACE_AGENT_SPEC = `UPDATE agents SET spec = :spec WHERE name = :name AND deleted_at IS NULL`;
export const DELETE_AGENT = `UPDATE agents SET deleted_at = :now WHERE name = :name AND deleted_at IS NULL`;

export const INSERT_INBOUND = `
INSERT INTO messages (session_id, direction, text, status, process_after, created_at)
VALUES (:sessionId, 'in', :text, 'pending', :now, :now) RETURNING *`;
export const INSERT_OUTBOUND = `
INSERT INTO messages (session_id, direction, text, data, status, turn_id, created_at)
VALUES (:sessionId, 'out', :text, :data, 'done', :turnId, :now) RETURNING id`;
export const MESSAGES_AFTER = `
SELECT * FROM messages WHERE session_id = :sessionId AND id > :afterId ORDER BY id LIMIT :limit`;
/** Runnable inbound messages of one session, oldest first. Params: sessionId, now. */
export const RUNNABLE_OF_SESSION = `
SELECT * FROM messages WHERE session_id = :sessionId AND direction = 'in' AND status = 'pending'
AND process_after <= :now ORDER BY id`;
export const TAKE_MESSAGE = `
UPDATE messages SET status = 'processing', tries = tries + 1, turn_id = :turnId WHERE id = :id AND status = 'pending'`;
export const FINISH_MESSAGE = `UPDATE messages SET status = 'done' WHERE id = :id AND status = 'processing'`;
export const RETRY_MESSAGE = `
UPDATE messages SET status = 'pending', process_after = :processAfter, turn_id = NULL, error = :error, error_code = :errorCode
WHERE id = :id AND status = 'processing'`;
/** Back to pending at once with its try given back (the worker stopped, not the turn). Params: id, now, error, errorCode. */
export const REQUEUE_MESSAGE = `
UPDATE messages SET status = 'pending', tries = tries - 1, process_after = :now, turn_id = NULL, error = :error, error_code = :errorCode
WHERE id = :id AND status = 'processing'`;
export const FAIL_MESSAGE = `
UPDATE messages SET status = 'failed', error = :error, error_code = :errorCode WHERE id = :id AND status = 'processing'`;
export const PROCESSING_OF_TURN = `SELECT * FROM messages WHERE turn_id = :turnId AND status = 'processing' ORDER BY id`;
/** Counts for a session view. Params: sessionId, now. */
export const SESSION_COUNTS = `
SELECT
  COUNT(*) FILTER (WHERE direction = 'in' AND status = 'pending') AS pending,
  COUNT(*) FILTER (WHERE direction = 'in' AND status = 'pending' AND process_after <= :now) AS runnable,
  (SELECT status FROM messages WHERE session_id = :sessionId AND direction = 'in' ORDER BY id DESC LIMIT 1) AS last_in_status
FROM messages WHERE session_id = :sessionId`;
export const LAST_REPLY = `
SELECT * FROM messages WHERE session_id = :sessionId AND direction = 'out' ORDER BY id DESC LIMIT 1`;
export const NEXT_PROCESS_AFTER = `
SELECT MIN(process_after) AS at FROM messages WHERE status = 'pending' AND process_after > :now`;

export const INSERT_TURN = `
INSERT INTO turns (id, session_id, attempt, generation, worker_id, sandbox, status, message_ids, started_at)
VALUES (:id, :sessionId, :attempt, :generation, :worker, :sandbox, 'running', :messageIds, :now)`;
export const RUNNING_TURN_OF_SESSION = `SELECT * FROM turns WHERE session_id = :sessionId AND status = 'running'`;
export const TURN_BY_ID = `SELECT * FROM turns WHERE id = :id`;
export const TURNS_OF_SESSION = `SELECT * FROM turns WHERE session_id = :sessionId ORDER BY started_at, id`;
export const SET_TURN_PROGRESS = `UPDATE turns SET progress = :text WHERE id = :id AND status = 'running'`;
export const END_TURN = `
UPDATE turns SET status = :status, error = :error, error_code = :errorCode, ended_at = :now WHERE id = :id AND status = 'running'`;

export const INSERT_EVENT = `
INSERT INTO events (session_id, type, data, created_at) VALUES (:sessionId, :type, :data, :now) RETURNING id`;
export const EVENTS_AFTER_OF_SESSION = `
SELECT * FROM events WHERE session_id = :sessionId AND id > :afterId ORDER BY id LIMIT :limit`;
/** Params: afterId, limit, tenant (null = every tenant). */
export const EVENTS_AFTER = `
SELECT e.* FROM events e
WHERE e.id > :afterId AND (CAST(:tenant AS TEXT) IS NULL OR e.session_id IN (SELECT id FROM sessions WHERE tenant = :tenant))
ORDER BY e.id LIMIT :limit`;

export const UPSERT_WORKER = `
INSERT INTO workers (id, host, pid, slots, heartbeat_at, started_at)
VALUES (:id, :host, :pid, :slots, :heartbeatAt, :startedAt)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, slots = excluded.slots`;
export const RENEW_WORKER = `UPDATE workers SET heartbeat_at = :now WHERE id = :id`;
export const DELETE_WORKER = `DELETE FROM workers WHERE id = :id`;
/** Workers silent for long, holding no lease. Params: deadBefore. */
export const DELETE_DEAD_WORKERS = `
DELETE FROM workers WHERE heartbeat_at <= :deadBefore AND id NOT IN (SELECT lease_owner FROM sessions WHERE lease_owner IS NOT NULL)`;
export const ALL_WORKERS = `SELECT * FROM workers ORDER BY started_at`;

export const INSERT_AUDIT = `
INSERT INTO audit (at, kind, session_id, generation, data) VALUES (:now, :kind, :sessionId, :generation, :data)`;
export const AUDIT_AFTER = `SELECT * FROM audit WHERE id > :afterId ORDER BY id LIMIT :limit`;

/** A commit's workspace bookkeeping. Params: id, turnId, now. */
export const SET_PENDING_LAYER = `
UPDATE sessions SET pending_layer = :turnId, workspace_version = workspace_version + 1, updated_at = :now WHERE id = :id`;
/** Promotion done. Params: id, turnId. 1 row = it was pending. */
export const CLEAR_PENDING_LAYER = `UPDATE sessions SET pending_layer = NULL WHERE id = :id AND pending_layer = :turnId`;
export const UPSERT_STATE = `
INSERT INTO session_state (session_id, key, value, turn_id, updated_at) VALUES (:sessionId, :key, :value, :turnId, :now)
ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, turn_id = excluded.turn_id, updated_at = excluded.updated_at`;
export const DELETE_STATE = `DELETE FROM session_state WHERE session_id = :sessionId AND key = :key`;
export const STATE_OF_SESSION = `SELECT key, value FROM session_state WHERE session_id = :sessionId ORDER BY key`;

/**
 * Statements whose text differs between engines: PostgreSQL takes row locks where SQLite
 * (one writer at a time) needs none.
 */
/** One upstream model call's token counts (issue 7). */
export const INSERT_MODEL_USAGE = `
INSERT INTO model_usage (at, agent, session_id, turn_id, generation, provider, model, input_tokens, output_tokens)
VALUES (:now, :agent, :sessionId, :turnId, :generation, :provider, :model, :inputTokens, :outputTokens)`;
/**
 * Totals over model calls matching every given filter (a NULL param matches all).
 * Params: agent, turnId, since. Returns calls, input_tokens, output_tokens, turns (distinct).
 */
export const SUM_MODEL_USAGE = `
SELECT COUNT(*) AS calls, COALESCE(SUM(input_tokens), 0) AS input_tokens,
  COALESCE(SUM(output_tokens), 0) AS output_tokens, COUNT(DISTINCT turn_id) AS turns
FROM model_usage
WHERE (CAST(:agent AS TEXT) IS NULL OR agent = :agent) AND (CAST(:turnId AS TEXT) IS NULL OR turn_id = :turnId)
  AND (CAST(:since AS BIGINT) IS NULL OR at >= :since)`;

/** A new active schedule (issue 7). Params: id, sessionId, agent, tenant, cron, tz, message, missed, nextRunAt, now. */
export const INSERT_SCHEDULE = `
INSERT INTO schedules (id, session_id, agent, tenant, cron, tz, message, missed, status, next_run_at, created_by_turn, created_at, updated_at)
VALUES (:id, :sessionId, :agent, :tenant, :cron, :tz, :message, :missed, 'active', :nextRunAt, :createdByTurn, :now, :now)`;
/** Live (not cancelled) schedules the agent's own turns made, over all its sessions: its cap counts these. Params: agent. */
export const AGENT_MADE_SCHEDULES = `
SELECT COUNT(*) AS n FROM schedules s JOIN sessions x ON x.id = s.session_id
WHERE x.agent = :agent AND s.created_by_turn IS NOT NULL AND s.status <> 'cancelled'`;
export const SCHEDULE_BY_ID = `SELECT * FROM schedules WHERE id = :id`;
/** Schedules of one session (or, NULL, all) of one tenant (or, NULL, all). Params: sessionId, tenant. */
export const SCHEDULES = `
SELECT * FROM schedules
WHERE (CAST(:sessionId AS TEXT) IS NULL OR session_id = :sessionId) AND (CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant)
ORDER BY created_at, id`;
/** Active schedules due by now. Params: now. */
export const DUE_SCHEDULES = `
SELECT * FROM schedules WHERE status = 'active' AND next_run_at <= :now ORDER BY next_run_at, id`;
/** Pause, resume or cancel. Params: id, status, nextRunAt, now. */
export const MOVE_SCHEDULE = `
UPDATE schedules SET status = :status, next_run_at = :nextRunAt, updated_at = :now
WHERE id = :id AND status != 'cancelled'`;
/**
 * A due run handled: compare-and-set on the due time, so it is handled once. Params: id,
 * dueAt (the next_run_at read), nextRunAt, fired (1 = sent, 0 = skipped), now. 1 row = this
 * caller handles it.
 */
export const ADVANCE_SCHEDULE = `
UPDATE schedules SET next_run_at = :nextRunAt, runs = runs + :fired,
  last_run_at = CASE WHEN :fired = 1 THEN :now ELSE last_run_at END, updated_at = :now
WHERE id = :id AND status = 'active' AND next_run_at = :dueAt`;

/** A grant's ops replace those of the same (agent, prefix). Params: agent, prefix, ops (comma-separated), now. */
export const UPSERT_STORAGE_GRANT = `
INSERT INTO storage_grants (agent, prefix, ops, created_at) VALUES (:agent, :prefix, :ops, :now)
ON CONFLICT (agent, prefix) DO UPDATE SET ops = excluded.ops`;
export const STORAGE_GRANTS_OF_AGENT = `SELECT * FROM storage_grants WHERE agent = :agent ORDER BY prefix`;
export const STORAGE_GRANT = `SELECT * FROM storage_grants WHERE agent = :agent AND prefix = :prefix`;
/** Params: agent, prefix. 1 row = revoked. */
export const DELETE_STORAGE_GRANT = `DELETE FROM storage_grants WHERE agent = :agent AND prefix = :prefix`;
/** A deleted agent's name can be taken again (by another tenant too): its grants and objects go with it. */
export const DELETE_STORAGE_GRANTS_OF_AGENT = `DELETE FROM storage_grants WHERE agent = :agent`;
export const DELETE_STORAGE_OBJECTS_OF_AGENT = `DELETE FROM storage_objects WHERE agent = :agent`;
/** Params: agent, key, sha256, size, blob, sessionId, generation, now. */
export const UPSERT_STORAGE_OBJECT = `
INSERT INTO storage_objects (agent, key, sha256, size, blob, session_id, generation, updated_at)
VALUES (:agent, :key, :sha256, :size, :blob, :sessionId, :generation, :now)
ON CONFLICT (agent, key) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, blob = excluded.blob,
  session_id = excluded.session_id, generation = excluded.generation, updated_at = excluded.updated_at`;
export const STORAGE_OBJECT = `SELECT * FROM storage_objects WHERE agent = :agent AND key = :key`;
/** Params: agent, key. 1 row = deleted. */
export const DELETE_STORAGE_OBJECT = `DELETE FROM storage_objects WHERE agent = :agent AND key = :key`;
/**
 * One page of an agent's objects under a prefix, in key order after the cursor key.
 * Params: agent, prefix, after ('' = from the start), limit. The prefix is compared as a
 * range, not with LIKE, so '%' and '_' in keys match themselves.
 */
export const STORAGE_OBJECTS_PAGE = `
SELECT * FROM storage_objects
WHERE agent = :agent AND key > CAST(:after AS TEXT)
  AND substr(key, 1, length(CAST(:prefix AS TEXT))) = CAST(:prefix AS TEXT)
ORDER BY key LIMIT :limit`;
/** Params: blob. A row = some object names the blob (garbage collection keeps it). */
export const STORAGE_BLOB_NAMED = `SELECT 1 FROM storage_objects WHERE blob = :blob LIMIT 1`;

export interface DialectStatements {
  /** The first session of the claim queue, locked (others skipped) where the engine can. Params: now, staleBefore. Returns session_id, lease_owner. */
  QUEUE_HEAD: string;
  /** EXPIRED_LEASES, its sessions locked (others skipped) where the engine can. Params: staleBefore. */
  EXPIRED_LEASES_LOCKED: string;
  /** The fence: 1 row when (generation, lease holder) are the caller's; locks the session row where the engine can. Params: id, generation, worker. */
  FENCE: string;
  /**
   * One delivery per live webhook that wants this event, in the event's own transaction,
   * so an event is never written without its deliveries (`webhooks.events` is a JSON
   * array, read with each engine's JSON functions). Params: eventId, sessionId, type, now.
   */
  INSERT_DELIVERIES_FOR_EVENT: string;
}

/** Mean run time of the last :limit committed turns, for queue ETAs. Returns ms (null: none yet). */
export const MEAN_TURN_MS = `
SELECT AVG(ended_at - started_at) AS ms FROM (
  SELECT started_at, ended_at FROM turns WHERE status = 'committed' ORDER BY ended_at DESC LIMIT :limit
) AS recent`;

export const INSERT_API_TOKEN = `
INSERT INTO api_tokens (id, tenant, admin, hash, label, created_at) VALUES (:id, :tenant, :admin, :hash, :label, :now)`;
/** A live token by the SHA-256 of its secret. Params: hash. */
export const API_TOKEN_BY_HASH = `SELECT * FROM api_tokens WHERE hash = :hash AND revoked_at IS NULL`;
export const ALL_API_TOKENS = `SELECT * FROM api_tokens ORDER BY created_at, id`;
export const REVOKE_API_TOKEN = `UPDATE api_tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL`;

export const INSERT_WEBHOOK = `
INSERT INTO webhooks (id, tenant, agent, session_id, url, secret, events, created_at)
VALUES (:id, :tenant, :agent, :sessionId, :url, :secret, :events, :now)`;
export const WEBHOOK_BY_ID = `SELECT * FROM webhooks WHERE id = :id AND deleted_at IS NULL`;
/** Deleted ones too: deliveries owed before the delete are still sent. */
export const WEBHOOK_EVEN_DELETED = `SELECT * FROM webhooks WHERE id = :id`;
/** Params: tenant (null = every tenant). */
export const ALL_WEBHOOKS = `
SELECT * FROM webhooks WHERE deleted_at IS NULL AND (CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant) ORDER BY created_at, id`;
export const DELETE_WEBHOOK = `UPDATE webhooks SET deleted_at = :now WHERE id = :id AND deleted_at IS NULL`;
/** The next due delivery. Params: now. */
export const DUE_DELIVERY = `
SELECT * FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= :now ORDER BY next_attempt_at, id LIMIT 1`;
/**
 * Takes a due delivery for one attempt: next_attempt_at moves to the end of the attempt's
 * lease, so no other dispatcher takes it meanwhile, and one left by a crash is due again
 * then. Params: id, now, leaseUntil. 1 row = taken.
 */
export const TAKE_DELIVERY = `
UPDATE webhook_deliveries SET attempts = attempts + 1, next_attempt_at = :leaseUntil
WHERE id = :id AND status = 'pending' AND next_attempt_at <= :now`;
export const DELIVERY_BY_ID = `SELECT * FROM webhook_deliveries WHERE id = :id`;
export const INSERT_ATTEMPT = `
INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_ms)
VALUES (:deliveryId, :attempt, :now, :statusCode, :error, :durationMs)`;
/** Ends an attempt; fenced by the attempt number so a stale dispatcher writes nothing. Params: id, attempt, status, nextAttemptAt, error, deliveredAt. */
export const END_ATTEMPT = `
UPDATE webhook_deliveries SET status = :status, next_attempt_at = :nextAttemptAt, last_error = :error, delivered_at = :deliveredAt
WHERE id = :id AND attempts = :attempt AND status = 'pending'`;
/** A dead letter (or any delivery) sent again from scratch. Params: id, now. */
export const RETRY_DELIVERY = `
UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = :now, delivered_at = NULL WHERE id = :id AND status <> 'pending'`;
export const DELIVERIES_OF_WEBHOOK = `
SELECT * FROM webhook_deliveries WHERE webhook_id = :webhookId AND id > :afterId ORDER BY id LIMIT :limit`;
export const ATTEMPTS_OF_DELIVERY = `SELECT * FROM webhook_attempts WHERE delivery_id = :deliveryId ORDER BY attempt`;
export const DELIVERY_COUNTS = `SELECT status, COUNT(*) AS n FROM webhook_deliveries GROUP BY status`;
export const EVENT_BY_ID = `SELECT * FROM events WHERE id = :id`;
