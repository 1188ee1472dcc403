/**
 * The chaos harness end to end, against real processes and real Docker: an API and two
 * workers, 10 sessions x 5 turns, a docker kill of a random sandbox every 1-3 s and one
 * SIGKILL of a worker; every invariant must hold and every request must end ok. Two more
 * sessions run one long model turn each (20 tool calls against the run's scripted model):
 * some fault hits one, each costs at most one model call redone, and their steps.txt holds
 * each line once. The data dir (store, workspaces, the children's logs) is kept when the
 * test fails.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { test } from 'node:test';
import { runChaos } from '../src/chaos/index.js';
import { assertRunHeld } from './helpers/chaos-report.js';

test('chaos: sandbox kills and a worker SIGKILL lose, duplicate and leak nothing', {
  timeout: 170_000,
}, async (t) => {
  const report = await runChaos({
    sessions: 10,
    turns: 5,
    longTurns: 2,
    durationCapMs: 150_000,
    killEveryMs: { min: 1000, max: 3000 },
    killWorkers: 1,
    slotsPerWorker: 2,
    lease: '3s',
    keep: true,
  });
  assertRunHeld(t, report);
  assert.equal(report.requests.ok, 52);
  const long = report.longTurns!;
  assert.ok(long.calls >= 2 * 21, `each long turn's 21 calls reached the model (${long.calls})`);
  assert.ok(
    long.perFault.some((f) => f.fault !== null),
    'a fault hit a long turn',
  );
  assert.ok(report.faults['sandbox-kill'] >= 1, 'at least one sandbox was killed');
  assert.equal(report.faults['worker-kill'], 1, 'exactly one worker was killed');
  assert.ok(report.redispatches >= 1, 'at least one turn was re-dispatched');
  await rm(report.settings.dataDir, { recursive: true, force: true });
});
