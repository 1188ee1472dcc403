import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';
import { sleep } from './sleep.js';

test('sleep resolves after its time, with or without a signal, and leaves no listener', async () => {
  const controller = new AbortController();
  await sleep(5);
  await sleep(5, controller.signal);
  assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
});

test('an abort ends the sleep at once and never rejects; an aborted signal does not sleep at all', async () => {
  const controller = new AbortController();
  const slept = sleep(60_000, controller.signal);
  controller.abort();
  await slept;
  assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
  await sleep(60_000, controller.signal);
});
