/**
 * The statements on `api_tokens`. Written once for both engines (../statements.ts says in
 * which dialect). Each header lists the statement's parameters and what it returns; a
 * guarded one (@guard) must change exactly one row, and says why nothing else can happen
 * (statements.test.ts holds the headers to the SQL and the guards to their callers).
 */

import { afterTimeAndId } from '../keyset.js';

/**
 * A new API token (its hash: the secret is never stored).
 * @param id the token
 * @param tenant null for the admin token
 * @param admin 1 = the operator
 * @param hash SHA-256 hex of the secret
 * @param label what it is for
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 */
export const INSERT_API_TOKEN = `
INSERT INTO api_tokens (id, tenant, admin, hash, label, created_at) VALUES (:id, :tenant, :admin, :hash, :label, :now)`;

/**
 * The live token with this hash.
 * @param hash SHA-256 hex of the secret
 * @returns the row, or none
 */
export const API_TOKEN_BY_HASH = `SELECT * FROM api_tokens WHERE hash = :hash AND revoked_at IS NULL`;

/**
 * A page of the tokens, oldest first.
 * @param afterAt created_at of the previous page's last row (-1: the first page)
 * @param afterId its id ('' for the first page)
 * @param limit at most this many
 * @returns rows
 */
export const ALL_API_TOKENS = `SELECT * FROM api_tokens WHERE ${afterTimeAndId('created_at')}`;

/**
 * A live token revoked.
 * @param id the token
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = revoked, 0 = none live has the id (the caller says false)
 */
export const REVOKE_API_TOKEN = `UPDATE api_tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL`;
