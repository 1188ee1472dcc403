/**
 * Conformance of the fair share of claims between tenants, run against SQLite and
 * PostgreSQL by store.conformance.test.ts: tenant A has many runnable sessions, tenant B
 * adds one at a time; claims alternate by weight (1:1, 3:1), a tenant back from idle does
 * not take every claim until it catches up, a tenant alone banks nothing against the next,
 * and the queue positions shown are the order the claims then take.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { agentSpecSchema } from '../../src/core/index.js';
import type { Store } from '../../src/store/index.js';
import { BASE, type OpenStore } from './conformance.js';

/** Two tenants, A and B, each with an agent; A's weight set with its token when given. */
async function twoTenants(open: OpenStore, weightA?: number): Promise<Store> {
  const store = await open();
  await store.createAgent(agentSpecSchema.parse({ name: 'agent-a', provider: 'command' }), BASE, 'A');
  await store.createAgent(agentSpecSchema.parse({ name: 'agent-b', provider: 'command' }), BASE, 'B');
  await store.insertApiToken(
    {
      id: 'tok-a',
      tenant: 'A',
      hash: 'hash-a',
      label: '',
      ...(weightA === undefined ? {} : { weight: weightA }),
    },
    BASE,
  );
  await store.registerWorker({ id: 'w1', host: 'h', pid: 1, slots: 100, heartbeatAt: BASE, startedAt: BASE });
  return store;
}

async function enqueue(store: Store, sessionId: string, now: number): Promise<void> {
  await store.enqueueMessage({
    sessionId,
    agent: `agent-${sessionId[0]}`,
    text: 'go',
    now,
  });
}

async function claim(store: Store, now: number): Promise<string> {
  const claimed = await store.claimRunnableSession('w1', now);
  assert.ok(claimed, 'a runnable session to claim');
  return claimed.session.id;
}

/** A queues `aCount` sessions; B queues one, and its next each time its last one is claimed. */
async function claimOrder(store: Store, aCount: number, claims: number): Promise<string[]> {
  let now = BASE;
  for (let i = 1; i <= aCount; i++) await enqueue(store, `a${i}`, now++);
  let b = 1;
  await enqueue(store, `b${b}`, now++);
  const order: string[] = [];
  for (let i = 0; i < claims; i++) {
    const id = await claim(store, now++);
    order.push(id);
    if (id === `b${b}`) await enqueue(store, `b${++b}`, now++);
  }
  return order;
}

/** The queue by position, then the sessions as claims take them, with no new work meanwhile. */
async function positionsAndClaims(
  store: Store,
  now: number,
): Promise<{ shown: string[]; claimed: string[] }> {
  const positions = await store.queuePositions(now);
  const shown = [...positions].sort((x, y) => x[1] - y[1]).map(([id]) => id);
  const claimed: string[] = [];
  for (let i = 0; i < shown.length; i++) claimed.push(await claim(store, now + 1 + i));
  assert.equal(await store.claimRunnableSession('w1', now + shown.length + 1), null);
  return { shown, claimed };
}

export function runFairShareConformance(kind: string, open: OpenStore): void {
  describe(`Store conformance, fair share between tenants: ${kind}`, () => {
    test('weights 1:1: B, adding one session at a time, takes every other claim; each tenant stays FIFO', async () => {
      const store = await twoTenants(open);
      assert.deepEqual(await claimOrder(store, 6, 10), 'a1 b1 a2 b2 a3 b3 a4 b4 a5 b5'.split(' '));
      await store.close();
    });

    test('weights 3:1: A takes three claims to each of B’s', async () => {
      const store = await twoTenants(open, 3);
      assert.deepEqual(await claimOrder(store, 9, 12), 'a1 b1 a2 a3 a4 b2 a5 a6 a7 b3 a8 a9'.split(' '));
      await store.close();
    });

    test('a tenant back from idle joins at the current turn, not with the claims it missed', async () => {
      const store = await twoTenants(open);
      await store.createAgent(agentSpecSchema.parse({ name: 'agent-c', provider: 'command' }), BASE, 'C');
      for (let i = 1; i <= 4; i++) {
        await enqueue(store, `a${i}`, BASE + 2 * i);
        await enqueue(store, `c${i}`, BASE + 2 * i + 1);
      }
      // A and C share the claims while B is away.
      const order: string[] = [];
      for (let i = 0; i < 6; i++) order.push(await claim(store, BASE + 10 + i));
      for (let i = 1; i <= 3; i++) await enqueue(store, `b${i}`, BASE + 20 + i);
      for (let i = 0; i < 5; i++) order.push(await claim(store, BASE + 30 + i));
      assert.deepEqual(order, ['a1', 'c1', 'a2', 'c2', 'a3', 'c3', 'b1', 'a4', 'c4', 'b2', 'b3']);
      await store.close();
    });

    test('a tenant alone in the queue is not charged: the next tenant to come shares from the start', async () => {
      const store = await twoTenants(open);
      for (let i = 1; i <= 6; i++) await enqueue(store, `a${i}`, BASE + i);
      for (let i = 1; i <= 3; i++) assert.equal(await claim(store, BASE + 10 + i), `a${i}`);
      for (let i = 1; i <= 2; i++) await enqueue(store, `b${i}`, BASE + 20 + i);
      const order: string[] = [];
      for (let i = 0; i < 5; i++) order.push(await claim(store, BASE + 30 + i));
      assert.deepEqual(order, ['a4', 'b1', 'a5', 'b2', 'a6']);
      await store.close();
    });

    for (const weightA of [1, 3]) {
      test(`queue positions are the claim order (weights ${weightA}:1), for a listing and one session`, async () => {
        const store = await twoTenants(open, weightA);
        // Some history first, so the tenants' passes differ.
        for (let i = 1; i <= 3; i++) await enqueue(store, `a${i}`, BASE + i);
        await claim(store, BASE + 5);
        for (let i = 4; i <= 9; i++) await enqueue(store, `a${i}`, BASE + 10 + i);
        for (let i = 1; i <= 4; i++) await enqueue(store, `b${i}`, BASE + 30 + i);
        const now = BASE + 40;
        const b3 = await store.getSessionView('b3', now);
        const { shown, claimed } = await positionsAndClaims(store, now);
        assert.deepEqual(shown, claimed);
        assert.equal(b3?.queuePosition, claimed.indexOf('b3') + 1);
        assert.ok(claimed.indexOf('b1') < claimed.indexOf('a9'), 'B is not behind all of A (FIFO)');
        await store.close();
      });
    }
  });
}
