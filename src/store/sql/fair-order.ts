/**
 * The fair share of claims between tenants, as start-time fair queuing: every tenant has a
 * pass (the virtual time its next claim starts at) and a weight; a claim goes to the
 * tenant with runnable work whose key, max(pass, virtual time), is smallest (ties to the
 * older head message), starts there, and moves its pass on by FAIR_SHARE_STRIDE / weight.
 * The virtual time is the latest claim's start, so a tenant back from idle joins at the
 * current time instead of spending credit it saved while away. A tenant alone in the queue
 * is not charged (nothing is at stake, and the order is the same). Within a tenant the order
 * stays FIFO by oldest pending message. The claim (FAIR_QUEUE) takes one step of this;
 * fairClaimOrder plays every step at once for queue positions, fairPosition counts one
 * session's place from per-tenant counts, and all three must agree.
 */

/** Pass moved per claim of a weight-1 tenant (CHARGE_TENANT_SHARE holds the same number). */
export const FAIR_SHARE_STRIDE = 1_000_000;

export interface TenantShare {
  weight: number;
  pass: number;
}

export interface Shares {
  byTenant: Map<string, TenantShare>;
  virtualTime: number;
}

export interface QueuedSession {
  sessionId: string;
  /** Its oldest pending inbound message (queued_id). */
  firstId: number;
  tenant: string;
}

/** A tenant's key for its k-th queued session (0-based): base + k·stride; null without a share row. */
function shareKeyOf(shares: Shares, tenant: string): { base: number; stride: number } | null {
  const share = shares.byTenant.get(tenant);
  if (!share) return null;
  return {
    base: Math.max(share.pass, shares.virtualTime),
    stride: Math.floor(FAIR_SHARE_STRIDE / share.weight),
  };
}

/**
 * The queued sessions in the order claims take them, when no new work arrives, each with
 * its key in the fair share (null: its tenant has no share row, and it comes after every
 * other; FAIR_QUEUE does not see it, the FIFO fallback takes it when nothing else is
 * queued). `skipped`: how many of each tenant's oldest sessions are left out of `queued`
 * (a page of the queue after the first), which the keys of the rest count.
 */
export function keyedClaimOrder<T extends QueuedSession>(
  queued: readonly T[],
  shares: Shares,
  skipped: ReadonlyMap<string, number> = new Map(),
): { entry: T; fairKey: number | null }[] {
  const byTenant = new Map<string, T[]>();
  for (const q of queued) {
    const entries = byTenant.get(q.tenant);
    if (entries) entries.push(q);
    else byTenant.set(q.tenant, [q]);
  }
  const keyed: { entry: T; key: number }[] = [];
  for (const [tenant, entries] of byTenant) {
    const share = shareKeyOf(shares, tenant);
    const from = skipped.get(tenant) ?? 0;
    entries.sort((a, b) => a.firstId - b.firstId);
    entries.forEach((entry, k) => {
      keyed.push({ entry, key: share ? share.base + (from + k) * share.stride : Number.POSITIVE_INFINITY });
    });
  }
  keyed.sort((a, b) => a.key - b.key || a.entry.firstId - b.entry.firstId);
  return keyed.map(({ entry, key }) => ({ entry, fairKey: Number.isFinite(key) ? key : null }));
}

/** The queued sessions in the order claims take them (keyedClaimOrder, without the keys). */
export function fairClaimOrder<T extends QueuedSession>(queued: readonly T[], shares: Shares): T[] {
  return keyedClaimOrder(queued, shares).map((k) => k.entry);
}

/** One tenant's part of the queue: its queued sessions, and how many of them come before a given session's first message. */
export interface TenantCount {
  n: number;
  ahead: number;
}

/** The key of one queued session of `tenant` (its `ahead` in counts places it in its tenant's part); null without a share row. */
export function fairKeyOf(counts: Map<string, TenantCount>, shares: Shares, tenant: string): number | null {
  const own = shareKeyOf(shares, tenant);
  return own ? own.base + (counts.get(tenant)?.ahead ?? 0) * own.stride : null;
}

/**
 * How many of each tenant's queued sessions come before a point of the order: a key
 * (null: past every tenant with a share row) and a first message, whose place among each
 * tenant's sessions is that tenant's `ahead` in counts. The k-th session (0-based) of
 * tenant U has key base_U + k·stride_U, so U's sessions before the point are those with a
 * smaller key, and at an equal key those before it in FIFO order.
 */
export function aheadByTenant(
  counts: Map<string, TenantCount>,
  shares: Shares,
  key: number | null,
): Map<string, number> {
  const ahead = new Map<string, number>();
  for (const [t, { n, ahead: before }] of counts) {
    const k = shareKeyOf(shares, t);
    // Tenants without a share row come after every other, FIFO among themselves.
    if (key === null) ahead.set(t, k ? n : before);
    else ahead.set(t, k ? Math.min(n, countBelow(key - k.base, k.stride, before)) : 0);
  }
  return ahead;
}

/** The 1-based place of one queued session (its tenant, its place in counts) in fairClaimOrder, from per-tenant counts alone. */
export function fairPosition(counts: Map<string, TenantCount>, shares: Shares, tenant: string): number {
  let ahead = 0;
  for (const n of aheadByTenant(counts, shares, fairKeyOf(counts, shares, tenant)).values()) ahead += n;
  return ahead + 1;
}

/** How many keys base + j·stride (j ≥ 0) sort before a key `diff` above base, ties going to the `before` oldest. */
function countBelow(diff: number, stride: number, before: number): number {
  if (diff < 0) return 0;
  const q = Math.floor(diff / stride);
  return diff % stride > 0 ? q + 1 : q + (before > q ? 1 : 0);
}
