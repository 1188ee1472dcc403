import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SANDBOX_KILL, turnRow } from '../../test/helpers/turn-row.js';
import type { Turn } from '../core/index.js';
import type { Partition, StoreFailover, StoreRestart, WorkerKill } from './fault-records.js';
import * as timing from './fault-timing.js';

const turn = (fields: Partial<Turn>): Turn => turnRow({ status: 'aborted', ...fields });
const LEASE_MS = 1000;
const kill = SANDBOX_KILL;
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

/** No self-fence, and a store retry budget of 3 s. */
const EVIDENCE: timing.OutageEvidence = { leaseMs: LEASE_MS, selfFences: [], storeRetryBudgetMs: 3000 };

test('a store restart explains a turn aborted with the store’s code while it was down, and nothing else of its own', () => {
  const restart: StoreRestart = { kind: 'store-restart', at: 3000, upAt: 6000 };
  const away = 'STORE_UNAVAILABLE' as const;
  const cases = [
    { name: 'ran across the stop', t: turn({ startedAt: 2000, endedAt: 3500, errorCode: away }), hit: true },
    { name: 'started while down', t: turn({ startedAt: 5000, endedAt: 9000, errorCode: away }), hit: true },
    {
      name: 'ended before the stop',
      t: turn({ startedAt: 1000, endedAt: 2500, errorCode: away }),
      hit: false,
    },
    {
      name: 'started after the restart',
      t: turn({ startedAt: 6500, endedAt: 7000, errorCode: away }),
      hit: false,
    },
    // An outage cannot make a sandbox exit or a step fail: whatever did is berth's own failure.
    {
      name: 'another code',
      t: turn({ startedAt: 2000, endedAt: 3500, errorCode: 'SANDBOX_EXITED' }),
      hit: false,
    },
    { name: 'committed', t: turn({ status: 'committed', startedAt: 2000, endedAt: 3500 }), hit: false },
    // A lease abort with no self-fence of its worker in the outage: nothing says the outage did it.
    {
      name: 'fenced, no fence logged',
      t: turn({ startedAt: 2000, endedAt: 3500, errorCode: 'WORKER_FENCED' }),
      hit: false,
    },
  ];
  for (const c of cases) {
    assert.equal(timing.storeRestartHits(restart, [c.t], EVIDENCE).length === 1, c.hit, c.name);
    if (c.t.status === 'aborted')
      assert.equal(timing.explainedByFault(c.t, [restart], EVIDENCE), c.hit, c.name);
  }
  const neverBack: StoreRestart = { ...restart, upAt: null };
  const late = turn({ startedAt: 9000, endedAt: 9500, errorCode: away });
  assert.equal(timing.storeRestartHits(neverBack, [late], EVIDENCE).length, 1);
});

test('a store outage explains a lease abort only when its worker fenced itself because of it, during the turn', () => {
  const restart: StoreRestart = { kind: 'store-restart', at: 3000, upAt: 6000 };
  // w1's last renewal the store took was at 2800: it fenced itself at 2800 + 0.6 of a lease = 3400, in the outage.
  const fenced = { workerId: 'w1', at: 3400, renewedAt: 2800 };
  const evidence = { ...EVIDENCE, selfFences: [fenced] };
  const cases = [
    {
      name: 'running at the fence',
      t: turn({ startedAt: 2000, endedAt: 3500, errorCode: 'WORKER_FENCED' }),
      hit: true,
    },
    {
      name: 'swept after the fence',
      t: turn({ startedAt: 2000, endedAt: 3800, errorCode: 'LEASE_EXPIRED' }),
      hit: true,
    },
    // A claim made after its fence: the fence did not kill this one.
    {
      name: 'started after the fence',
      t: turn({ startedAt: 3450, endedAt: 3500, errorCode: 'WORKER_FENCED' }),
      hit: false,
    },
    {
      name: 'another worker',
      t: turn({ workerId: 'w2', startedAt: 2000, endedAt: 3500, errorCode: 'WORKER_FENCED' }),
      hit: false,
    },
  ];
  for (const c of cases) assert.equal(timing.explainedByFault(c.t, [restart], evidence), c.hit, c.name);
  // The same fence of a worker whose renewals never failed in the outage (renewed at 6500, after it).
  const unrelated = { ...EVIDENCE, selfFences: [{ workerId: 'w1', at: 7100, renewedAt: 6500 }] };
  const t = turn({ startedAt: 5000, endedAt: 7200, errorCode: 'WORKER_FENCED' });
  assert.equal(
    timing.explainedByFault(t, [restart], unrelated),
    false,
    'a fence after the store was back is not its',
  );
});

test('a failover’s window ends at the promotion plus the store’s retry budget, not at berth’s own first commit', () => {
  const failover: StoreFailover = {
    kind: 'store-failover',
    what: 'postmaster',
    member: 'pg0',
    at: 1000,
    newPrimary: 'pg1',
    promotedAt: 2000,
    firstCommitAt: 40_000,
    firstFailureAt: null,
  };
  const away = (startedAt: number) =>
    turn({ startedAt, endedAt: startedAt + 100, errorCode: 'STORE_UNAVAILABLE' });
  assert.equal(timing.explainedByFault(away(4900), [failover], EVIDENCE), true, 'within promotion + 3 s');
  assert.equal(
    timing.explainedByFault(away(5100), [failover], EVIDENCE),
    false,
    'a slow recovery is no excuse',
  );
  const none = { ...failover, newPrimary: null, promotedAt: null, firstCommitAt: null };
  assert.equal(timing.explainedByFault(away(50_000), [none], EVIDENCE), true, 'no primary: to the end');
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
  assert.equal(timing.explainedByFault(turn({}), [kill], EVIDENCE), true);
  assert.equal(timing.explainedByFault(turn({ sandbox: 'berth-x-s1-g3' }), [kill], EVIDENCE), false);
  assert.equal(timing.explainedByFault(turn({ sandbox: 'berth-x-s1-g3' }), [workerKill], EVIDENCE), true);
  assert.equal(timing.explainedByFault(turn({ startedAt: 1600 }), [kill, workerKill], EVIDENCE), false);
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
    timing.explainedByFault(turn({ id: 'started-during', startedAt: 3000, endedAt: 7000 }), [cut], EVIDENCE),
  );
  assert.ok(
    !timing.explainedByFault(turn({ id: 'after-heal', startedAt: 8500, endedAt: 9000 }), [cut], EVIDENCE),
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
      EVIDENCE,
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
