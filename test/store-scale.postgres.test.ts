/**
 * The scale benchmark's load, reduced (bench/store-load.ts): 20,000 sessions (2,000 runnable)
 * on a real PostgreSQL, 200 simulated workers with a slot each renewing, sweeping and
 * claiming through the real Store at berth's rates (the default 10 s lease; turns of 1–5 s),
 * a tenth of them killed midway. What the load recorded is checked, never how fast it went:
 * - one holder at a time: a session's claims carry consecutive generations, and each claim
 *   came after the previous holder gave it back, or after that holder was killed and its
 *   lease had run out;
 * - renewals keep leases alive: no live worker lost its row or got a stale answer, and each
 *   of its claims was given back;
 * - the sweep takes over only sessions of killed workers whose lease had run out, and in the
 *   end every one of them;
 * - positions: the queued sessions are numbered 1..k, and claims take them in that order.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBenchAgent, Fleet, newLoadLog, registerWorkers } from '../bench/store-load.js';
import { seedSessions } from '../bench/store-seed.js';
import { sleep } from '../src/core/index.js';
import { openPostgresStore, type Store } from '../src/store/index.js';
import { freshDatabase } from './helpers/postgres.js';

// Long enough that a renewal delayed by a starved CPU (a loaded 2-core CI machine) does not lose a live lease.
const LEASE_MS = 20_000;
const RETRY = { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 };
const SESSIONS = 20_000;
const WORKERS = 200;
const SLOTS = 1;
const AGENT = 'b';

test('postgres at scale, reduced: claims are unique, renewals keep leases, the sweep takes only expired leases, positions follow claim order', async () => {
  const url = await freshDatabase();
  const stores: Store[] = [];
  for (let i = 0; i < 4; i++) stores.push(await openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY }));
  const store = stores[0]!;
  try {
    await createBenchAgent(store, AGENT);
    const workerIds = Array.from({ length: WORKERS }, (_, i) => `tw${i}`);
    await registerWorkers(stores, workerIds, SLOTS);
    await seedSessions(url, {
      sessions: SESSIONS,
      runnable: SESSIONS / 10,
      busy: 0,
      workerIds,
      agent: AGENT,
      now: store.clock.now(),
    });

    const log = newLoadLog();
    const fleet = new Fleet({ workerIds, stores, leaseMs: LEASE_MS, log });
    fleet.start();
    const slots = workerIds.flatMap((id) =>
      Array.from({ length: SLOTS }, () => fleet.slot(id, AGENT, () => 1000 + Math.random() * 4000)),
    );
    // A lease's time of load: every slot turns over a few times and every worker renews.
    await sleep(LEASE_MS);
    const killed = new Set(workerIds.filter((_, i) => i % 10 === 0));
    for (const id of killed) fleet.kill(id);
    // Their leases run out a lease after their last renewal; the live workers' sweeps take them.
    await sleep(2 * LEASE_MS);
    fleet.stopClaiming();
    await Promise.all(slots);
    await fleet.stop();

    assert.deepEqual(log.errors, [], 'no store call failed');
    assert.deepEqual(log.lostRenewals, [], 'no live worker lost its row');
    assert.deepEqual(log.staleCalls, [], 'no live worker lost a lease');
    assert.ok(log.claims.length > 2 * WORKERS * SLOTS, `the slots turned over (${log.claims.length} claims)`);
    const releaseKey = (r: { sessionId: string; generation: number }) => `${r.sessionId}@${r.generation}`;
    const released = new Set(log.releases.map(releaseKey));
    for (const c of log.claims)
      if (!killed.has(c.workerId))
        assert.ok(released.has(releaseKey(c)), `live claim ${releaseKey(c)} given back`);

    // One holder at a time, in generation order.
    const bySession = new Map<string, typeof log.claims>();
    for (const c of log.claims) bySession.set(c.sessionId, [...(bySession.get(c.sessionId) ?? []), c]);
    const expiredAt = (workerId: string) => log.renewedAt.get(workerId)! + LEASE_MS;
    for (const [sessionId, claims] of bySession) {
      claims.sort((a, b) => a.generation - b.generation);
      claims.forEach((c, i) => {
        assert.equal(c.generation, 2 + i, `${sessionId}: generation ${c.generation} is claim ${i + 1}`);
        const before = claims[i - 1];
        if (!before || released.has(releaseKey(before))) return;
        assert.ok(killed.has(before.workerId), `${sessionId}: taken from live ${before.workerId}`);
        // Taken by this claim, or by a sweep before it (then the claim may carry an earlier time).
        const expiry = expiredAt(before.workerId);
        const swept = log.reclaims.some((r) => r.sessionIds.includes(sessionId) && r.at >= expiry);
        assert.ok(c.at >= expiry || swept, `${sessionId}: taken before the lease ran out`);
      });
    }

    // The sweep took over only killed workers' sessions whose lease had run out, and all of them.
    const abandoned = log.claims.filter((c) => killed.has(c.workerId) && !released.has(releaseKey(c)));
    assert.ok(abandoned.length > 0, 'killed workers held sessions');
    for (const r of log.reclaims)
      for (const sessionId of r.sessionIds)
        assert.ok(
          abandoned.some((c) => c.sessionId === sessionId && r.at >= expiredAt(c.workerId)),
          `${sessionId} reclaimed by ${r.workerId} only from a killed holder whose lease ran out`,
        );
    const now = store.clock.now();
    const views = await store.listSessionViews(now);
    assert.deepEqual(
      views.filter((v) => v.leaseOwner !== null).map((v) => `${v.id} by ${v.leaseOwner}`),
      [],
      'no lease is left: the live gave theirs back, the killed ones were taken over',
    );

    // Positions: 1..k, and claims take the queue in that order.
    const queued = views
      .filter((v) => v.queuePosition !== null)
      .sort((a, b) => a.queuePosition! - b.queuePosition!);
    assert.ok(queued.length > 100);
    assert.deepEqual(
      queued.map((v) => v.queuePosition),
      queued.map((_, i) => i + 1),
    );
    assert.equal(await store.queueDepth(now), queued.length);
    await store.registerWorker({
      id: 'checker',
      host: 'h',
      pid: 1,
      slots: 1,
      heartbeatAt: now,
      startedAt: now,
    });
    for (const v of queued.slice(0, 100)) {
      assert.equal((await store.getSessionView(v.id, now))?.queuePosition, 1, `${v.id} is at the head`);
      assert.equal((await store.claimRunnableSession('checker', now))?.session.id, v.id);
    }
  } finally {
    for (const s of stores) await s.close();
  }
});
