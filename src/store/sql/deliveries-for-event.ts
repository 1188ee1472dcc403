/**
 * INSERT_DELIVERIES_FOR_EVENT of both engines: the same statement around the engine's
 * test "the JSON array w.events holds :type" (SQLite json_each, PostgreSQL json_array_elements_text).
 */
export function insertDeliveriesForEvent(eventsHoldType: string): string {
  return `
INSERT INTO webhook_deliveries (webhook_id, event_id, status, attempts, next_attempt_at, created_at)
SELECT w.id, CAST(:eventId AS BIGINT), 'pending', 0, CAST(:now AS BIGINT), CAST(:now AS BIGINT) FROM webhooks w JOIN sessions s ON s.id = :sessionId
WHERE w.deleted_at IS NULL AND w.tenant = s.tenant AND (w.session_id = s.id OR w.agent = s.agent)
AND ${eventsHoldType}`;
}
