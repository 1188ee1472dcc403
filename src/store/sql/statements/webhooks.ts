/**
 * The statements on `webhooks`, `webhook_deliveries` and `webhook_attempts`. Written once
 * for both engines (../statements.ts says in which dialect). Each header lists the
 * statement's parameters and what it returns; a guarded one (@guard) must change exactly
 * one row, and says why nothing else can happen (statements.test.ts holds the headers to
 * the SQL and the guards to their callers).
 */

import { afterTimeAndId } from '../keyset.js';

/**
 * A new webhook.
 * @param id the webhook
 * @param tenant its owner
 * @param agent the agent it follows, or null
 * @param sessionId the session it follows, or null
 * @param url where deliveries go
 * @param secret signs them
 * @param events JSON array of event types
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 */
export const INSERT_WEBHOOK = `
INSERT INTO webhooks (id, tenant, agent, session_id, url, secret, events, created_at)
VALUES (:id, :tenant, :agent, :sessionId, :url, :secret, :events, :now)`;

/**
 * A live webhook.
 * @param id the webhook
 * @returns the row, or none
 */
export const WEBHOOK_BY_ID = `SELECT * FROM webhooks WHERE id = :id AND deleted_at IS NULL`;

/**
 * A webhook, deleted ones too: deliveries owed before the delete are still sent.
 * @param id the webhook
 * @returns the row, or none
 */
export const WEBHOOK_EVEN_DELETED = `SELECT * FROM webhooks WHERE id = :id`;

/**
 * A page of a tenant's live webhooks, oldest first.
 * @param tenant null = every tenant
 * @param afterAt created_at of the previous page's last row (-1: the first page)
 * @param afterId its id ('' for the first page)
 * @param limit at most this many
 * @returns rows
 */
export const ALL_WEBHOOKS = `
SELECT * FROM webhooks WHERE deleted_at IS NULL AND (CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant)
  AND ${afterTimeAndId('created_at')}`;

/**
 * A live webhook deleted (soft: owed deliveries stay).
 * @param id the webhook
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = deleted, 0 = there was none live (the caller says false)
 */
export const DELETE_WEBHOOK = `UPDATE webhooks SET deleted_at = :now WHERE id = :id AND deleted_at IS NULL`;

/**
 * The next due delivery.
 * @param now due = next_attempt_at <= now
 * @returns the row, or none
 */
export const DUE_DELIVERY = `
SELECT * FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= :now ORDER BY next_attempt_at, id LIMIT 1`;

/**
 * Takes a due delivery for one attempt: next_attempt_at moves to the end of the attempt's
 * lease, so no other dispatcher takes it meanwhile, and one left by a crash is due again then.
 * @param id the delivery
 * @param now the transition's time, epoch ms
 * @param leaseUntil now + the attempt's lease
 * @returns changed rows: 1 = taken, 0 = another dispatcher took it first (the caller takes
 *   none)
 */
export const TAKE_DELIVERY = `
UPDATE webhook_deliveries SET attempts = attempts + 1, next_attempt_at = :leaseUntil
WHERE id = :id AND status = 'pending' AND next_attempt_at <= :now`;

/**
 * One delivery.
 * @param id the delivery
 * @returns the row, or none
 */
export const DELIVERY_BY_ID = `SELECT * FROM webhook_deliveries WHERE id = :id`;

/**
 * The log line of one attempt.
 * @param deliveryId the delivery
 * @param attempt its number
 * @param now the transition's time, epoch ms
 * @param statusCode the answer's, or null
 * @param error or null
 * @param durationMs how long it took
 * @returns changed rows: 1
 */
export const INSERT_ATTEMPT = `
INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_ms)
VALUES (:deliveryId, :attempt, :now, :statusCode, :error, :durationMs)`;

/**
 * Ends an attempt with its decision; fenced by the attempt number, so a stale dispatcher writes
 * nothing.
 * @param id the delivery
 * @param attempt the number it was taken with
 * @param status pending (retry), delivered or dead
 * @param nextAttemptAt when it is due again
 * @param error or null
 * @param deliveredAt epoch ms, or null
 * @returns changed rows: 1 = recorded, 0 = the attempt is stale: its lease ran out and another
 *   dispatcher took the delivery (the caller logs nothing)
 */
export const END_ATTEMPT = `
UPDATE webhook_deliveries SET status = :status, next_attempt_at = :nextAttemptAt, last_error = :error, delivered_at = :deliveredAt
WHERE id = :id AND attempts = :attempt AND status = 'pending'`;

/**
 * A delivered or dead delivery sent again from scratch.
 * @param id the delivery
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = due again, 0 = it is pending already (the caller says false)
 */
export const RETRY_DELIVERY = `
UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = :now, delivered_at = NULL WHERE id = :id AND status <> 'pending'`;

/**
 * A page of a webhook's deliveries, oldest first.
 * @param webhookId the webhook
 * @param afterId the last id seen
 * @param limit page size
 * @returns rows
 */
export const DELIVERIES_OF_WEBHOOK = `
SELECT * FROM webhook_deliveries WHERE webhook_id = :webhookId AND id > :afterId ORDER BY id LIMIT :limit`;

/**
 * A delivery's attempts, in order.
 * @param deliveryId the delivery
 * @returns rows
 */
export const ATTEMPTS_OF_DELIVERY = `SELECT * FROM webhook_attempts WHERE delivery_id = :deliveryId ORDER BY attempt`;

/**
 * Deliveries per status, for metrics.
 * @returns rows (status, n)
 */
export const DELIVERY_COUNTS = `SELECT status, COUNT(*) AS n FROM webhook_deliveries GROUP BY status`;
