/**
 * One page of a tenant's sessions in creation order, as a subquery the listing's statements
 * share, so each reads only the page's sessions (sessions_listing, sessions_tenant).
 * Parameters, named in each statement that uses it: tenant (null = every tenant); afterAt
 * and afterId, the last session of the previous page (-1 and '' for the first); limit.
 */
export const PAGE_FILTER = `(CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant)
  AND (created_at > :afterAt OR (created_at = :afterAt AND id > :afterId))
ORDER BY created_at, id LIMIT :limit`;

export const PAGE_IDS = `SELECT id FROM sessions WHERE ${PAGE_FILTER}`;
