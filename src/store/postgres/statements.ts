/**
 * The PostgreSQL text of the statements whose text differs between engines. Several
 * workers write at once, so a transition first locks the session rows it changes:
 * FOR NO KEY UPDATE (foreign-key checks of concurrent inserts, which take KEY SHARE, do
 * not wait for it); the claim and the sweep skip rows another transaction holds, so
 * workers claiming together never queue behind each other (SKIP LOCKED).
 */

import { insertDeliveriesForEvent } from '../sql/deliveries-for-event.js';
import { PAGE_IDS } from '../sql/session-page.js';
import type { DialectStatements } from '../sql/statements.js';
import { DEAD_HELD_QUEUE, EXPIRED_LEASES, FAIR_QUEUE, FREE_QUEUE } from '../sql/statements.js';

export const POSTGRES_STATEMENTS: DialectStatements = {
  FAIR_QUEUE_HEAD: `${FAIR_QUEUE} LIMIT 1 FOR NO KEY UPDATE OF s SKIP LOCKED`,
  QUEUE_HEAD: `${FREE_QUEUE} LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED`,
  DEAD_HELD_QUEUE_HEAD: `${DEAD_HELD_QUEUE} LIMIT 1 FOR NO KEY UPDATE OF s SKIP LOCKED`,
  EXPIRED_LEASES_LOCKED: `${EXPIRED_LEASES} FOR NO KEY UPDATE OF s SKIP LOCKED`,
  FENCE:
    'SELECT 1 FROM sessions WHERE id = :id AND generation = :generation AND lease_owner = :worker FOR NO KEY UPDATE',
  SESSION_LOCKED: 'SELECT * FROM sessions WHERE id = :id FOR NO KEY UPDATE',
  INSERT_DELIVERIES_FOR_EVENT: insertDeliveriesForEvent(
    'EXISTS (SELECT 1 FROM json_array_elements_text(w.events::json) AS e(value) WHERE e.value = CAST(:type AS TEXT))',
  ),
  LAST_MESSAGES: `SELECT m.* FROM (${PAGE_IDS}) p CROSS JOIN LATERAL (
  SELECT * FROM messages x WHERE x.session_id = p.id AND x.direction = :direction ORDER BY x.id DESC LIMIT 1
) m`,
};
