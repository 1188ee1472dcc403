/** The gate in front of the pool: permits, first come first served, a bounded wait. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConnectionGate } from './connection-gate.js';

test('ConnectionGate: at most N at once, served in arrival order, a wait past the bound is STORE_UNAVAILABLE', async () => {
  const gate = new ConnectionGate(2, 200);
  let running = 0;
  let peak = 0;
  const order: number[] = [];
  const job = (i: number) =>
    gate.run(async () => {
      running++;
      peak = Math.max(peak, running);
      order.push(i);
      await new Promise((r) => setTimeout(r, 10));
      running--;
      return i;
    });
  assert.deepEqual(await Promise.all([0, 1, 2, 3, 4, 5].map(job)), [0, 1, 2, 3, 4, 5]);
  assert.equal(peak, 2);
  assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);

  // A failing job gives its permit back.
  await assert.rejects(
    gate.run(async () => Promise.reject(new Error('boom'))),
    /boom/,
  );
  const hold = gate.run(() => new Promise((r) => setTimeout(r, 400)));
  const hold2 = gate.run(() => new Promise((r) => setTimeout(r, 400)));
  await assert.rejects(
    gate.run(async () => 'late'),
    (err: Error & { code?: string }) => {
      assert.equal(err.code, 'STORE_UNAVAILABLE');
      return true;
    },
  );
  await Promise.all([hold, hold2]);
  assert.equal(await gate.run(async () => 'after'), 'after', 'the timed-out waiter left no permit behind');
});
