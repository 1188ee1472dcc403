/** What only the PostgreSQL store does: migrations raced by many processes, LISTEN/NOTIFY, a database that restarts or is not there, leases judged by its clock. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { agentSpecSchema, isBerthError, sleep } from '../src/core/index.js';
import { openPostgresStore, type Store } from '../src/store/index.js';
import { migrationsFor } from '../src/store/sql/migrations.js';
import { freshDatabase, testCluster } from './helpers/postgres.js';
import { LEASE_MS, RETRY } from './store/conformance.js';

const open = (url: string, retryBudgetMs?: number) =>
  openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY, retryBudgetMs });
const BASE = 1_700_000_000_000;
/** A retry budget the tests below outlast on purpose, shorter than the default. */
const SHORT_BUDGET_MS = 5000;

/** Writes on `writer` until `listener` hears of one (its LISTEN connection opens in the background). */
async function untilHeard(writer: Store, listener: Store, sessionId: string): Promise<string[]> {
  const heard: string[] = [];
  const off = listener.onChange((c) => {
    if ((c.type === 'enqueued' || c.type === 'events') && c.sessionId === sessionId) heard.push(c.type);
  });
  for (let i = 0; i < 100 && heard.length === 0; i++) {
    await writer.enqueueMessage({ sessionId, agent: 'sh', text: `m${i}`, now: Date.now() });
    await new Promise((r) => setTimeout(r, 100));
  }
  off();
  return heard;
}

test('postgres: stores opened together on a new database migrate it once', async () => {
  const url = await freshDatabase();
  const stores = await Promise.all([1, 2, 3, 4].map(() => open(url)));
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query('SELECT version FROM schema_migrations ORDER BY version');
  await client.end();
  assert.deepEqual(
    rows.map((r) => Number(r.version)),
    migrationsFor('postgres').map((m) => m.version),
  );
  await Promise.all(stores.map((s) => s.close()));
});

test('postgres: a store hears of another store’s commits (LISTEN/NOTIFY), and not of its own twice', async () => {
  const url = await freshDatabase();
  const [a, b] = [await open(url), await open(url)];
  await a.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), Date.now());
  const heard = await untilHeard(a, b, 's');
  assert.ok(heard.includes('enqueued') && heard.includes('events'), `b heard ${heard.join()}`);
  const own: string[] = [];
  a.onChange((c) => own.push(c.type));
  await a.enqueueMessage({ sessionId: 's', text: 'once', now: Date.now() });
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(own, ['enqueued', 'event'], 'own changes delivered once, in full');
  await Promise.all([a.close(), b.close()]);
});

test('postgres: a wrong or unreachable database fails at open with one line naming it, without the password', async () => {
  const cluster = await testCluster();
  const cases = [
    { name: 'nobody listens', url: 'postgres://u:secret@127.0.0.1:1/db' },
    { name: 'no such database', url: cluster.url('no_such_db').replace('berth@', 'berth:secret@') },
  ];
  for (const c of cases) {
    await assert.rejects(open(c.url), (e: unknown) => {
      assert.ok(isBerthError(e, 'STORE_UNAVAILABLE'), c.name);
      assert.match(
        e.message,
        /^Cannot open the PostgreSQL store at postgres:\/\/\w+:\*\*\*@127\.0\.0\.1/,
        c.name,
      );
      assert.ok(!e.message.includes('secret') && !e.message.includes('\n'), c.name);
      return true;
    });
  }
});

test('postgres: the database restarts under an open store: a call made meanwhile completes, and notifications resume', async () => {
  const cluster = await testCluster();
  const url = await freshDatabase();
  const [a, b] = [await open(url), await open(url)];
  await a.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), Date.now());
  assert.ok((await untilHeard(a, b, 'before')).length > 0);

  await cluster.stop();
  const during = a.enqueueMessage({ sessionId: 'during', agent: 'sh', text: 'x', now: Date.now() });
  await cluster.start();
  await during;
  assert.equal((await b.listMessages('during', 0, 10)).length, 1, 'written once');
  assert.ok((await untilHeard(a, b, 'after')).length > 0, 'the listener reconnected');
  await Promise.all([a.close(), b.close()]);
});

test('postgres: a database that stays away fails a call with STORE_UNAVAILABLE, and nothing is written', async () => {
  const cluster = await testCluster();
  const url = await freshDatabase();
  const store = await open(url, SHORT_BUDGET_MS);
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), Date.now());
  await cluster.stop();
  try {
    await assert.rejects(
      store.enqueueMessage({ sessionId: 'x', agent: 'sh', text: 'x', now: Date.now() }),
      (e: unknown) => isBerthError(e, 'STORE_UNAVAILABLE'),
    );
  } finally {
    await cluster.start();
  }
  assert.equal(await store.getSessionView('x', Date.now()), null);
  await store.close();
});

test('postgres: leases are judged by the database clock: a worker a lease ahead steals no live lease, one a lease behind keeps no dead one', async () => {
  const url = await freshDatabase();
  const leaseMs = 1000;
  const skew = 5 * leaseMs;
  const openAt = (offsetMs: number) =>
    openPostgresStore({ url, leaseMs, retry: RETRY, localClock: { now: () => Date.now() + offsetMs } });
  const [exact, ahead, behind] = await Promise.all([openAt(0), openAt(skew), openAt(-skew)]);
  // The server runs on this machine: its clock is Date.now(); each store's clock reads it, whatever its local skew.
  for (const s of [exact, ahead, behind]) assert.ok(Math.abs(s.clock.now() - Date.now()) < 250);
  await exact.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), exact.clock.now());
  const register = (store: Store, id: string) =>
    store.registerWorker({
      id,
      host: 'h',
      pid: 1,
      slots: 1,
      heartbeatAt: store.clock.now(),
      startedAt: store.clock.now(),
    });
  await register(exact, 'holder');
  await register(ahead, 'fast');
  await register(behind, 'slow');

  // A live lease: the worker whose clock runs ahead does not take it by the database's clock (by its own it would).
  await exact.enqueueMessage({ sessionId: 'live', agent: 'sh', text: 'x', now: exact.clock.now() });
  assert.equal((await exact.claimRunnableSession('holder', exact.clock.now()))?.session.id, 'live');
  assert.deepEqual(await ahead.reclaimExpiredLeases(ahead.clock.now()), []);
  assert.deepEqual(
    await ahead.reclaimExpiredLeases(Date.now() + skew),
    ['live'],
    'its own clock would steal it',
  );

  // A dead lease: the holder stops renewing; the worker whose clock runs behind reclaims it a lease later.
  await exact.renewWorker('holder', exact.clock.now());
  assert.equal(
    (await exact.claimRunnableSession('holder', exact.clock.now()))?.session.id,
    'live',
    'claimed again',
  );
  await new Promise((r) => setTimeout(r, 1.5 * leaseMs));
  await behind.renewWorker('slow', behind.clock.now());
  assert.deepEqual(await behind.reclaimExpiredLeases(Date.now() - skew), [], 'its own clock would keep it');
  assert.deepEqual(await behind.reclaimExpiredLeases(behind.clock.now()), ['live']);
  await Promise.all([exact.close(), ahead.close(), behind.close()]);
});

test('postgres: a burst larger than the pool queues for connections, past the retry budget, and every call completes', async () => {
  const url = await freshDatabase();
  const store = await open(url, SHORT_BUDGET_MS);
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), Date.now());
  await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: Date.now() });
  // Every session read waits on this lock, holding its connection: longer than the store's retry
  // budget. A statement waiting on a lock is slow, not stuck: its server answers, it is not dropped.
  const locker = new pg.Client({ connectionString: url });
  await locker.connect();
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE');
  const burst = Array.from({ length: 30 }, () => store.getSessionView('s', Date.now()));
  await new Promise((r) => setTimeout(r, 11_000));
  await locker.query('COMMIT');
  await locker.end();
  const views = await Promise.all(burst);
  assert.ok(
    views.every((v) => v?.id === 's'),
    'thirty callers on ten connections: latency, not STORE_UNAVAILABLE',
  );
  await store.close();
});

test('postgres: a turn’s commit and a lease reclaim of its session, on two connections at once: exactly one wins, every time', {
  timeout: 300_000,
}, async (t) => {
  const url = await freshDatabase();
  const leaseMs = 1000;
  // One try: a message the reclaim aborts fails instead of coming back to the queue ahead of the next round's.
  const retry = { ...RETRY, maxTries: 1 };
  const [worker, sweeper] = [
    await openPostgresStore({ url, leaseMs, retry }),
    await openPostgresStore({ url, leaseMs, retry }),
  ];
  await worker.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), BASE);
  await worker.registerWorker({
    id: 'holder',
    host: 'h',
    pid: 1,
    slots: 1,
    heartbeatAt: BASE,
    startedAt: BASE,
  });
  const won = { commit: 0, reclaim: 0 };
  for (let round = 0; round < 200; round++) {
    const sessionId = `race-${round}`;
    const at = BASE + round * 100 * leaseMs;
    await worker.renewWorker('holder', at);
    await worker.enqueueMessage({ sessionId, agent: 'sh', text: 'x', now: at });
    const claim = await worker.claimRunnableSession('holder', at);
    assert.equal(claim?.session.id, sessionId);
    const fence = { sessionId, generation: claim.session.generation, workerId: 'holder' };
    const started = await worker.startTurn(fence, at);
    const turn = started.code === 'ok' && started.value ? started.value.turn : assert.fail('no turn');
    // Two leases later the holder looks dead to the sweeper, just as its commit comes in.
    const raceAt = at + 2 * leaseMs;
    // Which call leaves first alternates, by 0 to 4 ms, so both orders meet (sent in one order only,
    // the commit won all 200 rounds on a loaded machine).
    const jitterMs = 2 * (round % 3);
    const commitFirst = round % 2 === 0;
    const [commit, reclaimed] = await Promise.all([
      sleep(commitFirst ? 0 : jitterMs).then(() =>
        worker.commitTurn({ ...fence, turnId: turn.id, outputs: [{ text: 'reply' }] }, raceAt),
      ),
      sleep(commitFirst ? jitterMs : 0).then(() => sweeper.reclaimExpiredLeases(raceAt)),
    ]);
    const ended = (await sweeper.getTurn(turn.id))!;
    const messages = await sweeper.listMessages(sessionId, 0, 10);
    const replies = messages.filter((m) => m.direction === 'out');
    const events = (await sweeper.eventsAfter(sessionId, 0, 100)).map((e) => e.type);
    const where = `round ${round}: commit ${commit}, reclaimed ${JSON.stringify(reclaimed)}, turn ${ended.status}`;
    if (commit === 'ok') {
      won.commit++;
      assert.equal(ended.status, 'committed', where);
      assert.deepEqual(
        messages.map((m) => [m.direction, m.status]),
        [
          ['in', 'done'],
          ['out', 'done'],
        ],
        where,
      );
      assert.ok(!events.includes('retrying') && !events.includes('failed'), where);
    } else {
      won.reclaim++;
      assert.equal(commit, 'stale', where);
      assert.ok(reclaimed.includes(sessionId), where);
      assert.equal(ended.status, 'aborted', where);
      assert.equal(ended.errorCode, 'LEASE_EXPIRED', where);
      assert.deepEqual(replies, [], where);
      assert.equal(messages[0]?.status, 'failed', where);
      assert.ok(!events.includes('reply'), where);
    }
    // Whatever the reclaim passed by (a row the commit held) it takes now: the next round starts clean.
    await sweeper.reclaimExpiredLeases(raceAt);
    assert.equal((await sweeper.getSessionView(sessionId, raceAt))?.leaseOwner, null, where);
  }
  t.diagnostic(`the commit won ${won.commit} rounds, the reclaim ${won.reclaim}`);
  // A race one side always wins checked only that side's outcome.
  assert.ok(won.commit > 0 && won.reclaim > 0, `both sides must win some rounds: ${JSON.stringify(won)}`);
  await Promise.all([worker.close(), sweeper.close()]);
});
