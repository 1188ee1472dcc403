import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  decideAbortedMessage,
  decideSandboxHealth,
  decideWarmPoolTarget,
  isLeaseFresh,
  retryDelayMs,
} from './decide.js';

const BASE = 1_700_000_000_000;
const POLICY = { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 };
const LIMITS = { heartbeatTimeoutMs: 30_000, turnTimeoutMs: 600_000 };

test('retryDelayMs doubles from the base and is capped', () => {
  const cases: [number, number][] = [
    [1, 1000],
    [2, 2000],
    [3, 4000],
    [4, 8000],
    [7, 60_000],
    [30, 60_000],
  ];
  for (const [tries, expected] of cases)
    assert.equal(retryDelayMs(tries, POLICY), expected, `tries=${tries}`);
});

test('decideAbortedMessage retries with backoff until maxTries, then fails', () => {
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
  for (const c of cases) assert.deepEqual(decideAbortedMessage(c.tries, BASE, POLICY), c.expected, c.name);
});

test('decideAbortedMessage requeues without cost when the worker stopped, even on the last try', () => {
  for (const tries of [1, 5])
    assert.deepEqual(decideAbortedMessage(tries, BASE, POLICY, false), { action: 'requeue' });
});

test('decideAbortedMessage fails a terminal abort at once, whatever the tries', () => {
  for (const countsAsTry of [true, false])
    assert.deepEqual(decideAbortedMessage(1, BASE, POLICY, countsAsTry, true), { action: 'fail' });
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
