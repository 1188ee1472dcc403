/**
 * The statements on `storage_grants` and `storage_objects`: mediated storage. Written once
 * for both engines (../statements.ts says in which dialect). Each header lists the
 * statement's parameters and what it returns; a guarded one (@guard) must change exactly
 * one row, and says why nothing else can happen (statements.test.ts holds the headers to
 * the SQL and the guards to their callers).
 */

import { afterKey } from '../keyset.js';

/**
 * A grant; its ops replace those of the same (agent, prefix).
 * @param agent the agent
 * @param prefix '' or a folder ending in /
 * @param ops comma-separated
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 (inserted or replaced)
 */
export const UPSERT_STORAGE_GRANT = `
INSERT INTO storage_grants (agent, prefix, ops, created_at) VALUES (:agent, :prefix, :ops, :now)
ON CONFLICT (agent, prefix) DO UPDATE SET ops = excluded.ops`;

/**
 * A page of an agent's grants, by prefix.
 * @param agent the agent
 * @param after prefix of the previous page's last row (null: the first page)
 * @param limit at most this many
 * @returns rows
 */
export const STORAGE_GRANTS_OF_AGENT = `SELECT * FROM storage_grants WHERE agent = :agent AND ${afterKey('prefix', 'TEXT')}`;

/**
 * One grant.
 * @param agent the agent
 * @param prefix its prefix
 * @returns the row, or none
 */
export const STORAGE_GRANT = `SELECT * FROM storage_grants WHERE agent = :agent AND prefix = :prefix`;

/**
 * One grant revoked.
 * @param agent the agent
 * @param prefix its prefix
 * @returns changed rows: 1 = revoked, 0 = there was none (GRANT_NOT_FOUND)
 */
export const DELETE_STORAGE_GRANT = `DELETE FROM storage_grants WHERE agent = :agent AND prefix = :prefix`;

/**
 * A deleted agent's grants: its name can be taken again (by another tenant too).
 * @param agent the agent
 * @returns changed rows: any number
 */
export const DELETE_STORAGE_GRANTS_OF_AGENT = `DELETE FROM storage_grants WHERE agent = :agent`;

/**
 * A deleted agent's objects (their blobs become garbage).
 * @param agent the agent
 * @returns changed rows: any number
 */
export const DELETE_STORAGE_OBJECTS_OF_AGENT = `DELETE FROM storage_objects WHERE agent = :agent`;

/**
 * key → blob in an agent's namespace, written by a fenced session.
 * @param agent the namespace
 * @param key the key
 * @param sha256 of the content
 * @param size bytes
 * @param blob the file holding it
 * @param sessionId the writer
 * @param generation its generation
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 (inserted or replaced)
 */
export const UPSERT_STORAGE_OBJECT = `
INSERT INTO storage_objects (agent, key, sha256, size, blob, session_id, generation, updated_at)
VALUES (:agent, :key, :sha256, :size, :blob, :sessionId, :generation, :now)
ON CONFLICT (agent, key) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, blob = excluded.blob,
  session_id = excluded.session_id, generation = excluded.generation, updated_at = excluded.updated_at`;

/**
 * One object.
 * @param agent the namespace
 * @param key the key
 * @returns the row, or none
 */
export const STORAGE_OBJECT = `SELECT * FROM storage_objects WHERE agent = :agent AND key = :key`;

/**
 * One object deleted.
 * @param agent the namespace
 * @param key the key
 * @returns changed rows: 1 = deleted, 0 = there was none (the caller says false)
 */
export const DELETE_STORAGE_OBJECT = `DELETE FROM storage_objects WHERE agent = :agent AND key = :key`;

/**
 * One page of an agent's objects under a prefix, in key order after the cursor key. The prefix
 * is compared as a range, not with LIKE, so '%' and '_' in keys match themselves.
 * @param agent the namespace
 * @param prefix '' = every key
 * @param after the last key of the previous page, '' = from the start
 * @param limit page size
 * @returns rows
 */
export const STORAGE_OBJECTS_PAGE = `
SELECT * FROM storage_objects
WHERE agent = :agent AND key > CAST(:after AS TEXT)
  AND substr(key, 1, length(CAST(:prefix AS TEXT))) = CAST(:prefix AS TEXT)
ORDER BY key LIMIT :limit`;

/**
 * Whether some object names the blob (garbage collection keeps it).
 * @param blob the blob
 * @returns a row when one does
 */
export const STORAGE_BLOB_NAMED = `SELECT 1 FROM storage_objects WHERE blob = :blob LIMIT 1`;
