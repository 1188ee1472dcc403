import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffMs } from './backoff.js';

test('backoffMs doubles from the first delay and is capped', () => {
  const backoff = { firstMs: 1000, maxMs: 60_000 };
  const cases: { name: string; failures: number; expected: number }[] = [
    { name: 'no failure yet counts as the first', failures: 0, expected: 1000 },
    { name: 'first failure', failures: 1, expected: 1000 },
    { name: 'second', failures: 2, expected: 2000 },
    { name: 'third', failures: 3, expected: 4000 },
    { name: 'fourth', failures: 4, expected: 8000 },
    { name: 'past the cap', failures: 7, expected: 60_000 },
    { name: 'far past the cap (no overflow)', failures: 5000, expected: 60_000 },
  ];
  for (const c of cases) assert.equal(backoffMs(c.failures, backoff), c.expected, c.name);
});

test('a cap below the first delay wins', () => {
  assert.equal(backoffMs(1, { firstMs: 500, maxMs: 100 }), 100);
});
