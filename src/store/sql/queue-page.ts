/**
 * The claim queue a page at a time, in claim order (the fair share, fair-order.ts), read
 * without listing the queue: the tenants' shares and each tenant's part of the queue
 * counted (QUEUE_COUNTS, on its index), then at most a page of each tenant's part
 * (QUEUE_OF_TENANT). A page after a cursor (the last entry's fair key and first message)
 * leaves out, of each tenant's part, the sessions the order puts before that point, counted
 * as fairPosition counts them; so a session that stays queued is listed once, before or
 * after the cursor, while claims move the order on. Positions are global, as in views.
 * A tenant's own listing is its part of the queue, FIFO (its order in the fair share),
 * after the cursor's first message; each of its sessions' positions counts the others'
 * parts as one session's view does.
 */
import { BY_CLAIM, type ClaimQueueEntry, type PageRequest } from '../../core/index.js';
import { aheadByTenant, fairKeyOf, fairPosition, keyedClaimOrder, type TenantCount } from './fair-order.js';
import { all, type Program, type Row } from './program.js';
import { toQueuedSession, toShares } from './rows.js';

function* countsBefore(firstId: number, now: number, staleBefore: number): Program<Map<string, TenantCount>> {
  const rows = yield* all('QUEUE_COUNTS', { before: firstId, now, staleBefore });
  return new Map(rows.map((c) => [String(c.tenant), { n: Number(c.n), ahead: Number(c.ahead) }]));
}

export function* listQueue(
  now: number,
  leaseMs: number,
  tenant?: string,
  page?: PageRequest,
): Program<ClaimQueueEntry[]> {
  const staleBefore = now - leaseMs;
  const limit = page?.limit ?? Number.MAX_SAFE_INTEGER;
  const [key, afterFirst] = page?.after === undefined ? [undefined, 0] : BY_CLAIM.decode(page.after);
  const shares = toShares(yield* all('TENANT_SHARES', {}));
  const partOf = (t: string, skip: number, after: number) =>
    all('QUEUE_OF_TENANT', { tenant: t, afterFirst: after, skip, limit, now, staleBefore });
  const entryOf = (row: Row, position: number, fairKey: number | null): ClaimQueueEntry => ({
    ...toQueuedSession(row),
    pending: Number(row.pending),
    position,
    fairKey,
  });

  if (tenant !== undefined) {
    const entries: ClaimQueueEntry[] = [];
    for (const row of yield* partOf(tenant, 0, afterFirst)) {
      const counts = yield* countsBefore(Number(row.first_id), now, staleBefore);
      entries.push(entryOf(row, fairPosition(counts, shares, tenant), fairKeyOf(counts, shares, tenant)));
    }
    return entries;
  }
  // Counted up to and with the cursor's first message: at an equal key, it and the sessions
  // FIFO before it were listed.
  const counts = yield* countsBefore(afterFirst + 1, now, staleBefore);
  const skipped =
    key === undefined ? new Map<string, number>() : aheadByTenant(counts, shares, key === -1 ? null : key);
  const rows: Row[] = [];
  for (const [t, { n }] of counts) {
    const skip = skipped.get(t) ?? 0;
    if (n > skip) rows.push(...(yield* partOf(t, skip, 0)));
  }
  let ahead = 0;
  for (const n of skipped.values()) ahead += n;
  const byId = new Map(rows.map((r) => [String(r.session_id), r]));
  return keyedClaimOrder(rows.map(toQueuedSession), shares, skipped)
    .slice(0, limit)
    .map(({ entry, fairKey }, i) => entryOf(byId.get(entry.sessionId)!, ahead + i + 1, fairKey));
}
