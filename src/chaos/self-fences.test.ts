import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SELF_FENCE_LOG } from '../worker/index.js';
import { selfFencesIn } from './self-fences.js';

test('self-fences are read from the worker’s pino lines: when, and its last renewal by the lease age it logged', () => {
  const log = [
    JSON.stringify({ level: 50, time: 10_000, workerId: 'wrk_a', leaseAgeMs: 6100, msg: SELF_FENCE_LOG }),
    'not json',
    JSON.stringify({ level: 30, time: 10_050, workerId: 'wrk_a', msg: 'Session released' }),
    JSON.stringify({ level: 50, time: 12_000, leaseAgeMs: 6000, msg: SELF_FENCE_LOG }),
  ].join('\n');
  assert.deepEqual(selfFencesIn(log), [{ workerId: 'wrk_a', at: 10_000, renewedAt: 3900 }]);
});
