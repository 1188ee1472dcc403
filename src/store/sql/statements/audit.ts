/**
 * The statements on `audit`. Written once for both engines (../statements.ts says in which
 * dialect). Each header lists the statement's parameters and what it returns; a guarded
 * one (@guard) must change exactly one row, and says why nothing else can happen
 * (statements.test.ts holds the headers to the SQL and the guards to their callers).
 */

/**
 * One audit row.
 * @param now the transition's time, epoch ms
 * @param kind what happened
 * @param sessionId or null
 * @param generation the refused generation, or null
 * @param data its JSON
 * @returns changed rows: 1
 */
export const INSERT_AUDIT = `
INSERT INTO audit (at, kind, session_id, generation, data) VALUES (:now, :kind, :sessionId, :generation, :data)`;

/**
 * Audit rows after an id, oldest first.
 * @param afterId the last id seen
 * @param limit page size
 * @returns rows
 */
export const AUDIT_AFTER = `SELECT * FROM audit WHERE id > :afterId ORDER BY id LIMIT :limit`;
