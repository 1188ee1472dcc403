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

/**
 * The queued sessions in the order claims take them, when no new work arrives. A tenant
 * without a share row comes after every other (FAIR_QUEUE does not see it; the FIFO
 * fallback takes it when nothing else is queued).
 */
export function fairClaimOrder<T extends QueuedSession>(queued: readonly T[], shares: Shares): T[] {
  const byTenant = new Map<string, T[]>();
  for (const q of queued) {
    const entries = byTenant.get(q.tenant);
    if (entries) entries.push(q);
    else byTenant.set(q.tenant, [q]);
  }
  const keyed: { entry: T; key: number }[] = [];
  for (const [tenant, entries] of byTenant) {
    const share = shares.byTenant.get(tenant);
    const base = share ? Math.max(share.pass, shares.virtualTime) : Number.POSITIVE_INFINITY;
    const stride = Math.floor(FAIR_SHARE_STRIDE / (share?.weight ?? 1));
    entries.sort((a, b) => a.firstId - b.firstId);
    entries.forEach((entry, k) => {
      keyed.push({ entry, key: base + k * stride });
    });
  }
  keyed.sort((a, b) => a.key - b.key || a.entry.firstId - b.entry.firstId);
  return keyed.map((k) => k.entry);
}

/** One tenant's part of the queue: its queued sessions, and how many of them come before a given session's first message. */
export interface TenantCount {
  n: number;
  ahead: number;
}

/**
 * The 1-based place of one queued session (its tenant, its firstId) in fairClaimOrder, from
 * per-tenant counts alone: the k-th session (0-based) of tenant U has key base_U + k·stride_U,
 * so the sessions of U before a key K are those with a smaller key, and at an equal key the
 * one before it in FIFO order (the session's k is U's count ahead of it).
 */
export function fairPosition(counts: Map<string, TenantCount>, shares: Shares, tenant: string): number {
  const keyOf = (t: string) => {
    const share = shares.byTenant.get(t);
    if (!share) return null;
    return {
      base: Math.max(share.pass, shares.virtualTime),
      stride: Math.floor(FAIR_SHARE_STRIDE / share.weight),
    };
  };
  const own = keyOf(tenant);
  const key = own ? own.base + (counts.get(tenant)?.ahead ?? 0) * own.stride : null;
  let ahead = 0;
  for (const [t, { n, ahead: before }] of counts) {
    const k = keyOf(t);
    // Tenants without a share row come after every other, FIFO among themselves.
    if (key === null) ahead += k ? n : before;
    else if (k) ahead += Math.min(n, countBelow(key - k.base, k.stride, before));
  }
  return ahead + 1;
}

/** How many keys base + j·stride (j ≥ 0) sort before a key `diff` above base, ties going to the `before` oldest. */
function countBelow(diff: number, stride: number, before: number): number {
  if (diff < 0) return 0;
  const q = Math.floor(diff / stride);
  return diff % stride > 0 ? q + 1 : q + (before > q ? 1 : 0);
}
