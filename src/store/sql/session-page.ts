/**
 * One page of a tenant's sessions in creation order, as a subquery the listing's statements
 * share, so each reads only the page's sessions (a range of sessions_listing or
 * sessions_tenant). They read each page session's facts by its id (a correlated subquery
 * or a join from the page): `session_id IN (page)` would let PostgreSQL scan every message
 * to find the page's.
 * Parameters, named in each statement that uses it: tenant (null = every tenant); afterAt
 * and afterId, the last session of the previous page (-1 and '' for the first); limit.
 */
import { afterTimeAndId } from './keyset.js';

export const PAGE_FILTER = `(CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant)
  AND ${afterTimeAndId('created_at')}`;

export const PAGE_IDS = `SELECT id FROM sessions WHERE ${PAGE_FILTER}`;
