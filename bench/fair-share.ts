/**
 * The fair share of claims between tenants, through the real store code (SQLite in memory)
 * on a simulated clock: SLOTS slots take turns of TURN_MS each (claim, startTurn, commitTurn,
 * releaseSession at the simulated times), tenant A has A_MESSAGES queued (one session each),
 * tenant B sends one message every B_EVERY_MS (a new session each). Figures: B's wait from
 * its message to the claim of its session, p50/p99 in turns. Baseline, same run: the same
 * load with B's agent in tenant A, so one tenant's FIFO order (what every claim was before
 * the fair share). Target: B's wait p99 ≤ 2 turns.
 *
 * Then the claim's cost: claims per second of claimRunnableSession alone, on a file SQLite
 * store and on a PostgreSQL one (CLAIMERS claiming at once), with one tenant and with two.
 * `--base=<dir>`: also through the store module of another build (e.g. a worktree of the
 * commit before, built), alternating runs in this process, as its baseline.
 * `npm run bench -- fairShare [--base=/work/wt-base/dist]`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPostgresCluster } from '../src/chaos/index.js';
import { agentSpecSchema } from '../src/core/index.js';
import type * as StoreModule from '../src/store/index.js';
import type { Store } from '../src/store/index.js';
import { type BenchOptions, round, stats } from './harness.js';

const TURN_MS = 1000;
const SLOTS = 4;
const A_MESSAGES = 1000;
const B_EVERY_MS = 1000;
const BASE = 1_700_000_000_000;
/** Longer than any simulated run: no worker row goes stale on the simulated clock. */
const LEASE_MS = 24 * 3_600_000;
const RETRY = { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 };
const CLAIMERS = 8;

type Modules = typeof StoreModule;

async function twoAgents(store: Store, bTenant: string): Promise<void> {
  await store.createAgent(agentSpecSchema.parse({ name: 'agent-a', provider: 'command' }), BASE, 'A');
  await store.createAgent(agentSpecSchema.parse({ name: 'agent-b', provider: 'command' }), BASE, bTenant);
  await store.registerWorker({
    id: 'w',
    host: 'bench',
    pid: 1,
    slots: SLOTS,
    heartbeatAt: BASE,
    startedAt: BASE,
  });
}

/** B's waits (ms) in one simulated run; B in its own tenant, or in A's (FIFO). */
async function simulate(modules: Modules, bTenant: string, bMessages: number): Promise<number[]> {
  const store = modules.openSqliteStore({ path: ':memory:', leaseMs: LEASE_MS, retry: RETRY });
  await twoAgents(store, bTenant);
  for (let i = 0; i < A_MESSAGES; i++)
    await store.enqueueMessage({ sessionId: `a${i}`, agent: 'agent-a', text: 'go', now: BASE });
  const arrivals = Array.from({ length: bMessages }, (_, i) => BASE + 1 + i * B_EVERY_MS);
  const sentAt = new Map<string, number>();
  const waits: number[] = [];
  // Each slot's next free time (staggered, as turns end at different times); a turn's
  // commit and release happen when its slot frees.
  const slots: { freeAt: number; fence?: StoreModule.Fence; turnId?: string }[] = Array.from(
    { length: SLOTS },
    (_, i) => ({ freeAt: BASE + (i * TURN_MS) / SLOTS }),
  );
  let next = 0;
  while (waits.length < bMessages) {
    const slot = slots.reduce((a, b) => (b.freeAt < a.freeAt ? b : a));
    const now = slot.freeAt;
    for (; next < arrivals.length && arrivals[next]! <= now; next++) {
      const sessionId = `b${next}`;
      sentAt.set(sessionId, arrivals[next]!);
      await store.enqueueMessage({ sessionId, agent: 'agent-b', text: 'go', now: arrivals[next]! });
    }
    if (slot.fence) {
      await store.commitTurn({ ...slot.fence, turnId: slot.turnId!, outputs: [{ text: 'done' }] }, now);
      await store.releaseSession(slot.fence, now);
      slot.fence = undefined;
    }
    const claim = await store.claimRunnableSession('w', now);
    if (!claim) {
      slot.freeAt = arrivals[next] ?? now + TURN_MS;
      continue;
    }
    const fence = { sessionId: claim.session.id, generation: claim.session.generation, workerId: 'w' };
    const started = await store.startTurn(fence, now);
    if (started.code !== 'ok' || !started.value) throw new Error(`startTurn: ${started.code}`);
    Object.assign(slot, { fence, turnId: started.value.turn.id, freeAt: now + TURN_MS });
    const sent = sentAt.get(claim.session.id);
    if (sent !== undefined) waits.push(now - sent);
  }
  await store.close();
  return waits;
}

function inTurns(waits: number[]) {
  const s = stats(waits.map((w) => w / TURN_MS));
  return { p50: s.p50, p99: s.p99, max: s.max };
}

/** Claims per second of `claimers` claiming at once from `sessions` queued sessions, over one or two tenants. */
async function claimRate(store: Store, tenants: number, sessions: number, claimers: number): Promise<number> {
  await twoAgents(store, tenants === 2 ? 'B' : 'A');
  for (let i = 0; i < sessions; i++) {
    const agent = i % 2 === 0 || tenants === 1 ? 'agent-a' : 'agent-b';
    await store.enqueueMessage({ sessionId: `s${i}`, agent, text: 'go', now: BASE + i });
  }
  let claimed = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: claimers }, async () => {
      while (await store.claimRunnableSession('w', BASE + sessions)) claimed++;
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  if (claimed !== sessions) throw new Error(`claimed ${claimed} of ${sessions}`);
  await store.close();
  return round(claimed / seconds);
}

export async function fairShare({ quick }: BenchOptions): Promise<Record<string, unknown>> {
  const current = await import('../src/store/index.js');
  const baseDir = process.argv.find((a) => a.startsWith('--base='))?.slice('--base='.length);
  const base: Modules | undefined = baseDir ? await import(join(baseDir, 'src/store/index.js')) : undefined;
  const bMessages = quick ? 60 : 240;
  const fair = await simulate(current, 'B', bMessages);
  const fifo = await simulate(current, 'A', bMessages);

  const sessions = quick ? 500 : 2000;
  const dir = await mkdtemp(join(tmpdir(), 'berth-fair-'));
  const cluster = await startPostgresCluster();
  let databases = 0;
  const builds = { current, ...(base ? { base } : {}) };
  const rates: Record<string, Record<string, number>> = {};
  try {
    // A first round, not counted: a new cluster's first claims are slower, whichever build runs them.
    const warmUp = await cluster.createDatabase('fair_warm_up');
    await claimRate(
      await current.openPostgresStore({ url: warmUp, leaseMs: LEASE_MS, retry: RETRY }),
      1,
      sessions,
      CLAIMERS,
    );
    for (const tenants of [1, 2]) {
      for (const [build, modules] of Object.entries(builds)) {
        const sqlite = modules.openSqliteStore({
          path: join(dir, `${build}-${tenants}.db`),
          leaseMs: LEASE_MS,
          retry: RETRY,
        });
        const url = await cluster.createDatabase(`fair_${databases++}`);
        const postgres = await modules.openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY });
        rates[build] = {
          ...rates[build],
          [`sqliteTenants${tenants}`]: await claimRate(sqlite, tenants, sessions, 1),
          [`postgresTenants${tenants}`]: await claimRate(postgres, tenants, sessions, CLAIMERS),
        };
      }
    }
  } finally {
    await cluster.remove();
    await rm(dir, { recursive: true, force: true });
  }
  return {
    bench: 'fairShare',
    load: { turnMs: TURN_MS, slots: SLOTS, aQueued: A_MESSAGES, bEveryMs: B_EVERY_MS, bMessages },
    bWaitTurns: { fairShare: inTurns(fair), fifoBaseline: inTurns(fifo) },
    target: { bWaitP99Turns: 2, met: inTurns(fair).p99 <= 2 },
    claimsPerSecond: { sessions, postgresClaimers: CLAIMERS, ...rates },
  };
}
