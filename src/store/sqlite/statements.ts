/** The SQLite text of the statements whose text differs between engines: no row locks, SQLite has one writer at a time. */

import { insertDeliveriesForEvent } from '../sql/deliveries-for-event.js';
import { PAGE_IDS } from '../sql/session-page.js';
import type { DialectStatements } from '../sql/statements.js';
import { DEAD_HELD_QUEUE, EXPIRED_LEASES, FAIR_QUEUE, FREE_QUEUE } from '../sql/statements.js';

export const SQLITE_STATEMENTS: DialectStatements = {
  FAIR_QUEUE_HEAD: `${FAIR_QUEUE} LIMIT 1`,
  QUEUE_HEAD: `${FREE_QUEUE} LIMIT 1`,
  DEAD_HELD_QUEUE_HEAD: `${DEAD_HELD_QUEUE} LIMIT 1`,
  EXPIRED_LEASES_LOCKED: EXPIRED_LEASES,
  FENCE: 'SELECT 1 FROM sessions WHERE id = :id AND generation = :generation AND lease_owner = :worker',
  SESSION_LOCKED: 'SELECT * FROM sessions WHERE id = :id',
  INSERT_DELIVERIES_FOR_EVENT: insertDeliveriesForEvent(
    'EXISTS (SELECT 1 FROM json_each(w.events) WHERE value = :type)',
  ),
  LAST_MESSAGES: `SELECT m.* FROM (${PAGE_IDS}) p JOIN messages m ON m.id =
  (SELECT MAX(x.id) FROM messages x WHERE x.session_id = p.id AND x.direction = :direction)`,
};
