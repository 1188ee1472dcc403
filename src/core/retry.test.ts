import assert from 'node:assert/strict';
import { test } from 'node:test';
import { retryUntil } from './retry.js';

const QUICK = { firstMs: 1, maxMs: 4 };

/** A call that fails with `failures` errors first, then answers 'ok'. */
function failing(failures: Error[]) {
  const calls = { n: 0 };
  const call = async () => {
    const err = failures[calls.n++];
    if (err) throw err;
    return 'ok';
  };
  return { call, calls };
}

test('retryUntil: retryable failures are tried again until the call succeeds, each retry told', async () => {
  const { call, calls } = failing([new Error('away'), new Error('away')]);
  const told: [number, number][] = [];
  const value = await retryUntil(call, {
    retryable: () => true,
    backoff: QUICK,
    tries: 5,
    onRetry: (_err, failures, delayMs) => told.push([failures, delayMs]),
  });
  assert.equal(value, 'ok');
  assert.equal(calls.n, 3);
  assert.deepEqual(told, [
    [1, 1],
    [2, 2],
  ]);
});

test('retryUntil: a failure it may not retry is thrown at once', async () => {
  const bad = new Error('bad input');
  const { call, calls } = failing([bad]);
  await assert.rejects(retryUntil(call, { retryable: (e) => e !== bad, backoff: QUICK, tries: 5 }), bad);
  assert.equal(calls.n, 1);
});

test('retryUntil: the budget of tries, or a deadline no try may start after, ends it with the last failure or what spent says', async () => {
  const away = () => [new Error('1'), new Error('2'), new Error('3'), new Error('4')];
  const byTries = failing(away());
  await assert.rejects(
    retryUntil(byTries.call, { retryable: () => true, backoff: QUICK, tries: 2 }),
    /^Error: 2$/,
  );
  assert.equal(byTries.calls.n, 2);

  let clock = 0;
  const byTime = failing(away());
  await assert.rejects(
    retryUntil(
      async () => {
        clock += 10;
        return byTime.call();
      },
      {
        retryable: () => true,
        backoff: { firstMs: 1, maxMs: 1 },
        deadline: 25,
        now: () => clock,
        spent: (err) => new Error(`budget spent after ${(err as Error).message}`),
      },
    ),
    /budget spent after 3/,
  );
  assert.equal(byTime.calls.n, 3, 'the third try ends at 30, past the deadline of 25');
});

test('retryUntil: the backoff may depend on the failure', async () => {
  const slow = new Error('slow');
  const { call } = failing([slow, new Error('fast')]);
  const delays: number[] = [];
  await retryUntil(call, {
    retryable: () => true,
    backoff: (err) => (err === slow ? { firstMs: 3, maxMs: 3 } : QUICK),
    tries: 5,
    onRetry: (_e, _f, delayMs) => delays.push(delayMs),
  });
  assert.deepEqual(delays, [3, 2]);
});
