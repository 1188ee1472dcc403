/**
 * The fair share's two readings agree: one session's place counted from per-tenant counts
 * (fairPosition, what a view shows) is its place in the order every claim takes
 * (fairClaimOrder, what listings and the change feed show), over named cases and over
 * queues drawn from a seeded generator (weights, passes, virtual times, ties, tenants
 * without a share row).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  FAIR_SHARE_STRIDE,
  fairClaimOrder,
  fairPosition,
  type QueuedSession,
  type Shares,
} from './fair-order.js';

function shares(virtualTime: number, rows: Record<string, [weight: number, pass: number]>): Shares {
  return {
    virtualTime,
    byTenant: new Map(Object.entries(rows).map(([t, [weight, pass]]) => [t, { weight, pass }])),
  };
}

function queue(spec: string): QueuedSession[] {
  // "a1 b2 a3": tenant a's session with first message 1, …
  return spec.split(' ').map((s) => ({ sessionId: s, tenant: s[0]!, firstId: Number(s.slice(1)) }));
}

/** Every session's fairPosition, in the order of fairClaimOrder. */
function positionsAgree(queued: QueuedSession[], s: Shares): void {
  const order = fairClaimOrder(queued, s);
  for (const q of queued) {
    const counts = new Map<string, { n: number; ahead: number }>();
    for (const o of queued) {
      const c = counts.get(o.tenant) ?? { n: 0, ahead: 0 };
      counts.set(o.tenant, { n: c.n + 1, ahead: c.ahead + (o.firstId < q.firstId ? 1 : 0) });
    }
    assert.equal(
      fairPosition(counts, s, q.tenant),
      order.indexOf(q) + 1,
      `${q.sessionId} in ${JSON.stringify(order)}`,
    );
  }
}

const S = FAIR_SHARE_STRIDE;
const cases: { name: string; queued: string; shares: Shares; order: string }[] = [
  { name: 'one tenant: FIFO', queued: 'a3 a1 a2', shares: shares(0, { a: [1, 0] }), order: 'a1 a2 a3' },
  {
    name: 'equal weights and passes: alternate, ties to the older',
    queued: 'a1 a2 a3 b4 b5',
    shares: shares(0, { a: [1, 0], b: [1, 0] }),
    order: 'a1 b4 a2 b5 a3',
  },
  {
    name: 'weight 3 to 1',
    queued: 'a1 a2 a3 a4 a5 b6 b7',
    shares: shares(0, { a: [3, 0], b: [1, 0] }),
    order: 'a1 b6 a2 a3 a4 b7 a5',
  },
  {
    name: 'a pass behind the virtual time counts from it',
    queued: 'a1 a2 b3 b4',
    shares: shares(5 * S, { a: [1, 6 * S], b: [1, 0] }),
    order: 'b3 a1 b4 a2',
  },
  {
    name: 'a tenant without a share row comes last',
    queued: 'c1 a2 a3',
    shares: shares(0, { a: [1, 0] }),
    order: 'a2 a3 c1',
  },
];
for (const c of cases) {
  test(`fair order: ${c.name}`, () => {
    const queued = queue(c.queued);
    assert.equal(
      fairClaimOrder(queued, c.shares)
        .map((q) => q.sessionId)
        .join(' '),
      c.order,
    );
    positionsAgree(queued, c.shares);
  });
}

test('fairPosition is the place in fairClaimOrder for 300 drawn queues', () => {
  let seed = 42;
  const rand = (n: number) => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed % n;
  };
  for (let i = 0; i < 300; i++) {
    const tenants = ['a', 'b', 'c', 'd'].slice(0, 1 + rand(4));
    const rows: Record<string, [number, number]> = {};
    for (const t of tenants) if (rand(5) > 0) rows[t] = [1 + rand(4), rand(4) * (S / 2)];
    const queued = Array.from({ length: 1 + rand(12) }, (_, j) => {
      const tenant = tenants[rand(tenants.length)]!;
      return { sessionId: `${tenant}${j}`, tenant, firstId: j };
    });
    positionsAgree(queued, shares(rand(3) * S, rows));
  }
});
