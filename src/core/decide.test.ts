import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  decideAbortedMessage,
  decideLeftoverLayer,
  decideOwnLease,
  decideResidentRecycle,
  decideSandboxHealth,
  decideWarmPoolTarget,
  isLeaseFresh,
  nextBatch,
} from './decide.js';

const BASE = 1_700_000_000_000;
const POLICY = { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 };
const LIMITS = { heartbeatTimeoutMs: 30_000, turnTimeoutMs: 600_000 };

test('decideAbortedMessage retries a failed turn with backoff until maxTries, then fails', () => {
  const cases: { name: string; tries: number; expected: ReturnType<typeof decideAbortedMessage> }[] = [
    {
      name: 'first failure',
      tries: 1,
      expected: { action: 'retry', processAfter: BASE + 1000, delayMs: 1000 },
    },
    {
      name: 'fourth failure',
      tries: 4,
      expected: { action: 'retry', processAfter: BASE + 8000, delayMs: 8000 },
    },
    { name: 'fifth failure', tries: 5, expected: { action: 'fail' } },
    { name: 'beyond', tries: 9, expected: { action: 'fail' } },
  ];
  for (const c of cases)
    assert.deepEqual(decideAbortedMessage(c.tries, BASE, POLICY, 'TURN_FAILED'), c.expected, c.name);
});

test('decideAbortedMessage retries a lost sandbox at once the first time, then backs off as for any fault', () => {
  const delays = [1, 2, 3, 4].map((tries) => decideAbortedMessage(tries, BASE, POLICY, 'SANDBOX_EXITED'));
  assert.deepEqual(
    delays.map((d) => (d.action === 'retry' ? d.delayMs : d.action)),
    [0, 1000, 2000, 4000],
  );
  assert.deepEqual(
    decideAbortedMessage(5, BASE, POLICY, 'SANDBOX_EXITED'),
    { action: 'fail' },
    'tries limit kept',
  );
  for (const code of ['TURN_FAILED', 'TURN_TIMEOUT', 'STEP_FAILED', 'SANDBOX_UNRESPONSIVE'] as const)
    assert.deepEqual(
      decideAbortedMessage(1, BASE, POLICY, code),
      { action: 'retry', processAfter: BASE + 1000, delayMs: 1000 },
      `${code}: a fault of the work backs off from the first`,
    );
});

test('decideAbortedMessage requeues without cost when the worker stopped, even on the last try', () => {
  for (const tries of [1, 5])
    assert.deepEqual(decideAbortedMessage(tries, BASE, POLICY, 'WORKER_STOPPING'), { action: 'requeue' });
});

test('decideAbortedMessage fails a terminal abort at once, whatever the tries', () => {
  for (const code of ['SANDBOX_OUT_OF_MEMORY', 'WORKSPACE_QUOTA_EXCEEDED', 'SESSION_ARCHIVED'] as const)
    assert.deepEqual(decideAbortedMessage(1, BASE, POLICY, code), { action: 'fail' }, code);
});

test('decideAbortedMessage, whatever the tries: holds a lost resident workspace’s message (its try given back, never failed); interrupts an interrupted turn’s (never retried, no backoff)', () => {
  for (const [code, action] of [
    ['RESIDENT_WORKSPACE_LOST', 'hold'],
    ['TURN_INTERRUPTED', 'interrupt'],
  ] as const)
    for (const tries of [1, 5, 9])
      assert.deepEqual(
        decideAbortedMessage(tries, BASE, POLICY, code),
        { action },
        `${code}, tries ${tries}`,
      );
});

test('nextBatch: the oldest pending message decides; the messages right after it tried as often go with it', () => {
  const m = (id: number, tries: number, processAfter = BASE) => ({ id, tries, processAfter });
  const cases: { name: string; pending: ReturnType<typeof m>[]; expected: number[] }[] = [
    { name: 'nothing pending', pending: [], expected: [] },
    { name: 'fresh messages go together', pending: [m(1, 0), m(2, 0), m(3, 0)], expected: [1, 2, 3] },
    {
      name: 'the oldest in backoff holds every later one, due or not',
      pending: [m(1, 1, BASE + 1), m(2, 0), m(3, 0)],
      expected: [],
    },
    { name: 'a retry runs alone, ahead of fresh ones', pending: [m(1, 1), m(2, 0), m(3, 0)], expected: [1] },
    { name: "a retried turn's messages go together", pending: [m(1, 2), m(2, 2), m(3, 0)], expected: [1, 2] },
    { name: 'the run stops at the first other count', pending: [m(1, 0), m(2, 1), m(3, 0)], expected: [1] },
  ];
  for (const c of cases)
    assert.deepEqual(
      nextBatch(c.pending, BASE).map((x) => x.id),
      c.expected,
      c.name,
    );
});

test('decideSandboxHealth kills on missed heartbeats and overlong turns', () => {
  const cases: {
    name: string;
    lastHeartbeatAt: number;
    turnStartedAt: number | null;
    expected: ReturnType<typeof decideSandboxHealth>;
  }[] = [
    {
      name: 'fresh, idle',
      lastHeartbeatAt: BASE - 1000,
      turnStartedAt: null,
      expected: { action: 'ok', nextCheckInMs: 29_000 },
    },
    {
      name: 'fresh, in a turn',
      lastHeartbeatAt: BASE,
      turnStartedAt: BASE - 599_000,
      expected: { action: 'ok', nextCheckInMs: 1000 },
    },
    {
      name: 'heartbeat just timed out',
      lastHeartbeatAt: BASE - 30_000,
      turnStartedAt: BASE - 100,
      expected: { action: 'kill', reason: 'heartbeat-timeout', ageMs: 30_000 },
    },
    {
      name: 'turn past its deadline',
      lastHeartbeatAt: BASE,
      turnStartedAt: BASE - 600_000,
      expected: { action: 'kill', reason: 'turn-timeout', ageMs: 600_000 },
    },
  ];
  for (const c of cases) assert.deepEqual(decideSandboxHealth(c, BASE, LIMITS), c.expected, c.name);
});

test('isLeaseFresh is strict at the boundary', () => {
  assert.equal(isLeaseFresh(BASE - 9_999, BASE, 10_000), true);
  assert.equal(isLeaseFresh(BASE - 10_000, BASE, 10_000), false);
});

test('decideOwnLease: claims stop at two missed renewals, the fence comes at 0.6 of a lease', () => {
  const cases: { ageMs: number; expected: ReturnType<typeof decideOwnLease> }[] = [
    { ageMs: 0, expected: 'ok' },
    { ageMs: 3_999, expected: 'ok' },
    // A failover held this worker's renewal past 4 s: a session it claimed then was fenced 30 ms later.
    { ageMs: 4_000, expected: 'no-claims' },
    { ageMs: 5_999, expected: 'no-claims' },
    { ageMs: 6_000, expected: 'fence' },
    { ageMs: 60_000, expected: 'fence' },
  ];
  for (const c of cases)
    assert.equal(decideOwnLease(BASE - c.ageMs, BASE, 10_000), c.expected, `${c.ageMs} ms`);
});

test('decideWarmPoolTarget follows recent demand between min (in use) and max', () => {
  const cases = [
    { recentTakes: 0, inUse: true, min: 1, max: 4, expected: 1 },
    { recentTakes: 0, inUse: false, min: 1, max: 4, expected: 0 },
    { recentTakes: 3, inUse: true, min: 1, max: 4, expected: 3 },
    { recentTakes: 9, inUse: true, min: 1, max: 4, expected: 4 },
    { recentTakes: 0, inUse: true, min: 500, max: 500, expected: 500 },
    { recentTakes: 0, inUse: true, min: 8, max: 2, expected: 2 },
    { recentTakes: 5, inUse: true, min: 1, max: 0, expected: 0 },
  ];
  for (const { expected, ...c } of cases) assert.equal(decideWarmPoolTarget(c), expected, JSON.stringify(c));
});

test('decideLeftoverLayer: a layer whose turn may still commit is kept, even when its worker looks dead', () => {
  const live = (id: string) => id === 'w-live';
  const running = { status: 'running', generation: 3, workerId: 'w-stale' };
  type SessionRow = { pendingLayer: string | null; generation: number; leaseOwner: string | null };
  const fenceHolds: SessionRow = { pendingLayer: null, generation: 3, leaseOwner: 'w-stale' };
  const cases: {
    name: string;
    turn: typeof running | null;
    session: SessionRow | null;
    expected: string;
  }[] = [
    { name: 'running, fence holds, owner stale', turn: running, session: fenceHolds, expected: 'keep' },
    {
      name: 'running, lease reclaimed',
      turn: running,
      session: { ...fenceHolds, leaseOwner: null },
      expected: 'discard',
    },
    {
      name: 'running, claimed again',
      turn: running,
      session: { ...fenceHolds, generation: 4 },
      expected: 'discard',
    },
    { name: 'aborted', turn: { ...running, status: 'aborted' }, session: fenceHolds, expected: 'discard' },
    { name: 'no turn row', turn: null, session: fenceHolds, expected: 'discard' },
    { name: 'no session row', turn: running, session: null, expected: 'discard' },
    {
      name: 'committed, owner live',
      turn: { ...running, status: 'committed' },
      session: { ...fenceHolds, pendingLayer: 't1', leaseOwner: 'w-live' },
      expected: 'keep',
    },
    {
      // The turn row was read before its commit; the session, read after, names the layer.
      name: 'read as running, committed since, owner gone',
      turn: running,
      session: { ...fenceHolds, pendingLayer: 't1', leaseOwner: null },
      expected: 'promote',
    },
    {
      name: 'committed and already promoted',
      turn: { ...running, status: 'committed' },
      session: { ...fenceHolds, leaseOwner: null },
      expected: 'discard',
    },
  ];
  for (const c of cases) assert.equal(decideLeftoverLayer('t1', c.turn, c.session, live), c.expected, c.name);
});

test('decideResidentRecycle: age, resident set, open files, a request made for this sandbox', () => {
  const policy = { maxAgeMs: 60_000, maxRssMb: 100, maxOpenFiles: 50 };
  const fresh = { startedAt: BASE, usage: { rssBytes: 10 * 2 ** 20, openFiles: 10 }, recycleRequestedAt: 0 };
  const cases: { name: string; s: typeof fresh; recycle: boolean; reason?: RegExp }[] = [
    { name: 'within every limit', s: fresh, recycle: false },
    { name: 'no report yet', s: { ...fresh, usage: null as never }, recycle: false },
    {
      name: 'requested for this sandbox',
      s: { ...fresh, recycleRequestedAt: BASE + 1 },
      recycle: true,
      reason: /requested/,
    },
    { name: 'request older than the sandbox', s: { ...fresh, recycleRequestedAt: BASE - 1 }, recycle: false },
    { name: 'too old', s: { ...fresh, startedAt: BASE - 60_000 }, recycle: true, reason: /older than 60000/ },
    {
      name: 'leaked memory',
      s: { ...fresh, usage: { rssBytes: 101 * 2 ** 20, openFiles: 1 } },
      recycle: true,
      reason: /101 MiB over 100/,
    },
    {
      name: 'leaked files',
      s: { ...fresh, usage: { rssBytes: 1, openFiles: 51 } },
      recycle: true,
      reason: /51 open files/,
    },
  ];
  for (const c of cases) {
    const d = decideResidentRecycle(c.s, BASE + 1000, policy);
    assert.equal(d.recycle, c.recycle, c.name);
    if (d.recycle && c.reason) assert.match(d.reason, c.reason, c.name);
  }
  assert.equal(
    decideResidentRecycle({ ...fresh, startedAt: 0 }, BASE, {}).recycle,
    false,
    'no policy: only on request',
  );
});
