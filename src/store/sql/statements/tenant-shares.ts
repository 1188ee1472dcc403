/**
 * The statements on `tenant_shares`: each tenant's weight and place in the fair share of
 * claims (start-time fair queuing, see ../fair-order.ts). Written once for both engines
 * (../statements.ts says in which dialect). Each header lists the statement's parameters
 * and what it returns.
 */

/**
 * A tenant takes part in the fair share from its first agent on (weight 1 unless set).
 * @param tenant the tenant
 * @returns changed rows: 1 = new, 0 = it had a row
 */
export const ENSURE_TENANT_SHARE = `INSERT INTO tenant_shares (tenant) VALUES (:tenant) ON CONFLICT (tenant) DO NOTHING`;

/**
 * A tenant's weight: it gets `weight` claims for every one of a weight-1 tenant while both
 * have work. Its place (pass) is kept, so a change applies from its next claim.
 * @param tenant the tenant
 * @param weight 1..FAIR_SHARE_MAX_WEIGHT (core)
 * @returns changed rows: 1
 */
export const SET_TENANT_WEIGHT = `
INSERT INTO tenant_shares (tenant, weight) VALUES (:tenant, :weight)
ON CONFLICT (tenant) DO UPDATE SET weight = excluded.weight`;

/**
 * Every tenant's share, with the queue's virtual time (the latest claim's start).
 * @returns rows (tenant, weight, pass, virtual_time)
 */
export const TENANT_SHARES = `
SELECT tenant, weight, pass, (SELECT MAX(last_start) FROM tenant_shares) AS virtual_time FROM tenant_shares`;

/**
 * A claim of the tenant's starts at max(its pass, the virtual time) and moves its pass on by
 * 1,000,000 / weight (integer division in both engines; a tenant without a row starts at weight 1). Computed from the row as it is when
 * the update runs, so claims of one tenant that commit together are each charged.
 * @param tenant the claimed session's tenant
 * @param virtualTime the virtual time the claim read (a stale one only delays a tenant back from idle)
 * @returns changed rows: 1
 */
export const CHARGE_TENANT_SHARE = `
INSERT INTO tenant_shares (tenant, pass, last_start)
VALUES (:tenant, CAST(:virtualTime AS BIGINT) + 1000000, CAST(:virtualTime AS BIGINT))
ON CONFLICT (tenant) DO UPDATE SET
  last_start = CASE WHEN tenant_shares.pass > CAST(:virtualTime AS BIGINT) THEN tenant_shares.pass ELSE CAST(:virtualTime AS BIGINT) END,
  pass = CASE WHEN tenant_shares.pass > CAST(:virtualTime AS BIGINT) THEN tenant_shares.pass ELSE CAST(:virtualTime AS BIGINT) END
    + 1000000 / tenant_shares.weight`;
