import assert from 'node:assert/strict';
import { test } from 'node:test';
import { turnRow } from '../../test/helpers/turn-row.js';
import type { Turn } from '../core/index.js';
import type { Partition, SandboxKill, StoreFailover, StoreRestart, WorkerKill } from './fault-records.js';
import * as timing from './fault-timing.js';

const turn = (fields: Partial<Turn>): Turn => turnRow({ status: 'aborted', ...fields });
const LEASE_MS = 1000;
const kill: SandboxKill = {
  kind: 'sandbox-kill',
  at: 1500,
  killedAt: 1500,
  container: 'berth-x-s1-g1',
  warm: false,
  workerId: 'w1',
};
const workerKill: WorkerKill = {
  kind: 'worker-kill',
  at: 1500,
  pid: 1,
  workerId: 'w1',
  child: 'worker-1',
  restartedAt: null,
  restartedPid: null,
};

test('a sandbox kill hits the aborted turn that ran in that sandbox at that moment', () => {
  const hit = turn({ id: 'hit' });
  const warm = turn({ id: 'warm', sandbox: 'berth-x-pool-wrk_a-3' });
  const turns = [
    hit,
    warm,
    turn({ id: 'other-generation', generation: 2, sandbox: 'berth-x-s1-g2' }),
    turn({ id: 'other-session', sessionId: 's2', sandbox: 'berth-x-s2-g1' }),
    turn({ id: 'ended-before', endedAt: 1400 }),
    turn({ id: 'committed', status: 'committed' }),
  ];
  assert.deepEqual(timing.sandboxKillHits(kill, turns), [hit]);
  assert.deepEqual(timing.sandboxKillHits({ ...kill, container: 'berth-x-pool-wrk_a-3' }, turns), [warm]);
  // A warm sandbox bound while the kill call was under way: the turn it started is the kill's hit too.
  const late = turn({ id: 'late', sandbox: 'berth-x-pool-wrk_a-4', startedAt: 1550 });
  const slowKill = { ...kill, container: 'berth-x-pool-wrk_a-4', killedAt: 1600 };
  assert.deepEqual(timing.sandboxKillHits(slowKill, [late]), [late]);
  assert.deepEqual(timing.sandboxKillHits({ ...slowKill, killedAt: 1500 }, [late]), []);
});

test('a worker kill hits only its turns aborted by lease expiry', () => {
  const hit = turn({ id: 'hit', errorCode: 'LEASE_EXPIRED', endedAt: 4600 });
  const turns = [
    hit,
    turn({ id: 'other-worker', workerId: 'w2', errorCode: 'LEASE_EXPIRED' }),
    turn({ error: 'x' }),
  ];
  assert.deepEqual(timing.workerKillHits(workerKill, turns), [hit]);
});

test('a store restart hits every aborted turn that ran while the database was down', () => {
  const restart: StoreRestart = { kind: 'store-restart', at: 3000, upAt: 6000 };
  const cases = [
    { name: 'ran across the stop', t: turn({ startedAt: 2000, endedAt: 3500 }), hit: true },
    { name: 'started while down', t: turn({ startedAt: 5000, endedAt: 9000 }), hit: true },
    { name: 'ended before the stop', t: turn({ startedAt: 1000, endedAt: 2500 }), hit: false },
    { name: 'started after the restart', t: turn({ startedAt: 6500, endedAt: 7000 }), hit: false },
    { name: 'committed', t: turn({ status: 'committed', startedAt: 2000, endedAt: 3500 }), hit: false },
    // Its worker's renewal came too late after the restart: the worker fenced itself.
    {
      name: 'started after the restart, fenced within a lease',
      t: turn({ startedAt: 6500, endedAt: 6800, errorCode: 'WORKER_FENCED' }),
      hit: true,
    },
    {
      name: 'started after the restart, swept within a lease',
      t: turn({ startedAt: 6900, endedAt: 8000, errorCode: 'LEASE_EXPIRED' }),
      hit: true,
    },
    {
      name: 'fenced, started a lease after the restart',
      t: turn({ startedAt: 7100, endedAt: 7200, errorCode: 'WORKER_FENCED' }),
      hit: false,
    },
  ];
  for (const c of cases) {
    assert.equal(timing.storeRestartHits(restart, [c.t], LEASE_MS).length === 1, c.hit, c.name);
    if (c.t.status === 'aborted')
      assert.equal(timing.explainedByFault(c.t, [restart], LEASE_MS), c.hit, c.name);
  }
  const neverBack: StoreRestart = { ...restart, upAt: null };
  assert.equal(
    timing.storeRestartHits(neverBack, [turn({ startedAt: 9000, endedAt: 9500 })], LEASE_MS).length,
    1,
  );
});

test('detect and recover are measured from the fault; a kill that hit nothing is missed', () => {
  const turns = [
    turn({ id: 'a', endedAt: 1620 }),
    turn({ id: 'b', status: 'committed', startedAt: 2700, endedAt: 3900 }),
    turn({ id: 'c', status: 'committed', startedAt: 5000, endedAt: 6000 }),
  ];
  const t = timing.timingOf(
    [
      { at: 1500, hits: timing.sandboxKillHits(kill, turns) },
      { at: 8000, hits: [] },
    ],
    turns,
  );
  assert.equal(t.injected, 2);
  assert.equal(t.hit, 1);
  assert.equal(t.missed, 1);
  assert.equal(t.unrecovered, 0);
  assert.deepEqual(t.detectMs, { n: 1, p50: 120, p99: 120, max: 120 });
  assert.deepEqual(t.recoverMs, { n: 1, p50: 2400, p99: 2400, max: 2400 });
});

test('an aborted turn is explained only by a fault in effect on its sandbox or worker while it ran', () => {
  assert.equal(timing.explainedByFault(turn({}), [kill], LEASE_MS), true);
  assert.equal(timing.explainedByFault(turn({ sandbox: 'berth-x-s1-g3' }), [kill], LEASE_MS), false);
  assert.equal(timing.explainedByFault(turn({ sandbox: 'berth-x-s1-g3' }), [workerKill], LEASE_MS), true);
  assert.equal(timing.explainedByFault(turn({ startedAt: 1600 }), [kill, workerKill], LEASE_MS), false);
});

test('nearest-rank percentiles', () => {
  assert.equal(timing.stats([]), null);
  const s = timing.stats(Array.from({ length: 100 }, (_, i) => 100 - i))!;
  assert.deepEqual(s, { n: 100, p50: 50, p99: 99, max: 100 });
  assert.deepEqual(timing.stats([7]), { n: 1, p50: 7, p99: 7, max: 7 });
});

test('a partition hits the aborted turns its worker ran at the cut; commits from its lease-less time are counted as accepted', () => {
  const cut: Partition = {
    kind: 'partition',
    at: 1500,
    workerId: 'w1',
    child: 'worker-1',
    sandboxes: ['berth-x-s1-g1'],
    sandboxesAliveAfterLease: 0,
    healedAt: 8000,
  };
  const turns = [
    turn({ id: 'hit' }),
    turn({ id: 'other-worker', workerId: 'w2' }),
    turn({ id: 'started-after', startedAt: 1600 }),
    turn({ id: 'committed-before-lease', status: 'committed', endedAt: 4000 }),
    turn({ id: 'committed-lease-less', status: 'committed', startedAt: 4000, endedAt: 5000 }),
    turn({ id: 'committed-after-heal', status: 'committed', startedAt: 8500, endedAt: 9000 }),
    turn({ id: 'other-worker-commit', workerId: 'w2', status: 'committed', endedAt: 5000 }),
  ];
  assert.deepEqual(
    timing.partitionHits(cut, turns).map((t) => t.id),
    ['hit'],
  );
  assert.deepEqual(
    timing.lateCommits(cut, 3000, turns).map((t) => t.id),
    ['committed-lease-less'],
  );
  assert.ok(
    timing.explainedByFault(turn({ id: 'started-during', startedAt: 3000, endedAt: 7000 }), [cut], LEASE_MS),
  );
  assert.ok(
    !timing.explainedByFault(turn({ id: 'after-heal', startedAt: 8500, endedAt: 9000 }), [cut], LEASE_MS),
  );
});

test('faultsThatBit: a kill bites the turn it ends; a store outage bites any turn that ran through it', () => {
  const turns = [
    turn({}),
    turn({ id: 'ok', sandbox: 'berth-x-s2-g1', status: 'committed', workerId: 'w2' }),
    turn({ id: 'lost-node', sandbox: 'berth-x-s4-g1', workerId: 'w4', errorCode: 'LEASE_EXPIRED' }),
  ];
  const failover: StoreFailover = {
    kind: 'store-failover',
    what: 'postmaster',
    member: 'pg0',
    at: 1800,
    newPrimary: 'pg1',
    promotedAt: 1900,
    firstCommitAt: 2500,
    firstFailureAt: null,
  };
  assert.deepEqual(
    timing.faultsThatBit(
      [
        kill, // ends the aborted turn: bit
        { ...kill, container: 'berth-x-s2-g1' }, // its turn committed: the kill missed it
        { ...kill, container: 'berth-x-pool-wrk_a-1' }, // an idle warm sandbox
        { ...workerKill, workerId: 'w3' }, // a worker with no turn
        { kind: 'store-restart', at: 1200, upAt: 1300 }, // the turns lived through it: bit
        { kind: 'store-restart', at: 3000, upAt: null }, // after every turn ended
        failover,
        {
          kind: 'node-kill',
          at: 1500,
          node: 'n1',
          workerId: 'w4',
          deadAt: 1500,
          droppedAt: 1600,
          restartedAt: 2000,
        }, // its worker's turn was taken over: bit
        { kind: 'blobs-kill', at: 1200, upAt: 1300 }, // the turns lived through the S3 outage: bit
      ],
      turns,
    ),
    {
      'sandbox-kill': 1,
      'worker-kill': 0,
      'node-kill': 1,
      'blobs-kill': 1,
      'store-restart': 1,
      'store-failover': 1,
      partition: 0,
    },
  );
});
