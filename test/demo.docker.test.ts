/** `make demo DEMO_FAST=1` as CI runs it: the CLI demo, fast, exits 0 with all 20 tasks completed and none lost. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { berth } from './helpers/processes.js';

test('berth demo --fast: 20 tasks on 4 slots with sandbox kills, all completed, none lost', async () => {
  const env = { ...process.env };
  delete env.BERTH_DATA;
  const started = Date.now();
  const r = await berth(['demo', '--fast'], env);
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(
    r.stdout,
    /Summary: 20\/20 completed, 0 failed; in the store 20 answered, 0 lost, 0 duplicated/,
  );
  // The kills must have hit work: a task retried after one and still completed.
  const kills = Number(/faults +(\d+) sandboxes killed/.exec(r.stdout)?.[1]);
  const hit = Number(/recoveries +(\d+) tasks hit by a kill completed anyway/.exec(r.stdout)?.[1]);
  assert.ok(kills >= 1, `at least one sandbox was killed:\n${r.stdout}`);
  assert.ok(hit >= 1, `at least one kill hit a running task:\n${r.stdout}`);
  assert.match(r.stdout, /dashboard: http:\/\/127\.0\.0\.1:\d+\/#token=berth_/);
  process.stderr.write(
    `demo --fast took ${((Date.now() - started) / 1000).toFixed(1)} s\n${r.stdout.split('Summary')[1] ?? ''}\n`,
  );
});
