import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import type { ScriptPlan } from '../core/index.js';
import { backgroundOf, expectedLog, MAX_SLEEP_MS, MIN_SLEEP_MS, sleepMs, turnPlan } from './workload.js';

const opts = { session: 's-3', seed: 42 };

/** Runs plans the way the script provider would, on an in-memory file and state; throws on a failed assert. */
function execute(plans: ScriptPlan[]): { file: string | null; state: unknown } {
  let file: string | null = null;
  let state: unknown = null;
  for (const plan of plans) {
    for (const step of plan.steps) {
      if ('assertFile' in step && file !== step.assertFile.equals) throw new Error(`assertFile: ${file}`);
      if ('assertState' in step && !isDeepStrictEqual(state, step.assertState.equals))
        throw new Error(`assertState: ${state}`);
      if ('append' in step) file = (file ?? '') + step.append.content;
      if ('putState' in step) state = step.putState.value;
    }
  }
  return { file, state };
}

test('turn 1 expects nothing committed yet', () => {
  const plan = turnPlan(3, 1, opts);
  assert.deepEqual(plan.steps.slice(0, 2), [
    { assertFile: { path: 'log.txt', equals: null } },
    { assertState: { key: 'turns', equals: null } },
  ]);
  assert.equal(plan.reply, 's-3:1');
});

test('turn k expects exactly turns 1..k-1, in order, and its reply names the session and turn', () => {
  const plan = turnPlan(0, 4, opts);
  assert.deepEqual(plan.steps[0], {
    assertFile: { path: 'log.txt', equals: '1:a\n1:b\n2:a\n2:b\n3:a\n3:b\n' },
  });
  assert.deepEqual(plan.steps[1], { assertState: { key: 'turns', equals: 3 } });
  assert.equal(plan.reply, 's-3:4');
});

test('turns 3n and 3n+1 leave a tail running (redirected, holding the output); the next turn checks it is gone', () => {
  const kinds = (k: number) => turnPlan(1, k, opts).steps.map((s) => Object.keys(s)[0]);
  const runs = (k: number) => turnPlan(1, k, opts).steps.flatMap((s) => ('run' in s ? [s.run] : []));
  assert.deepEqual(kinds(1), ['assertFile', 'assertState', 'append', 'sleep', 'run', 'append', 'putState']);
  assert.deepEqual(kinds(2), ['assertFile', 'assertState', 'run', 'append', 'sleep', 'append', 'putState']);
  assert.deepEqual(kinds(3), ['assertFile', 'assertState', 'append', 'sleep', 'run', 'append', 'putState']);
  assert.deepEqual(kinds(4), [
    'assertFile',
    'assertState',
    'run',
    'append',
    'sleep',
    'run',
    'append',
    'putState',
  ]);
  assert.deepEqual(runs(1), ['tail -f log.txt &'], 'no redirection: the tail holds the job’s output');
  assert.deepEqual(runs(2), ['! pgrep -x tail']);
  assert.deepEqual(runs(3), ['tail -f log.txt > /dev/null 2>&1 &']);
  assert.deepEqual(runs(4), ['! pgrep -x tail', 'tail -f log.txt &']);
  assert.deepEqual(runs(5), ['! pgrep -x tail']);
  assert.deepEqual(runs(6), ['tail -f log.txt > /dev/null 2>&1 &'], 'turn 5 left none: no check');
  // Every turn that leaves one is followed by a check, whatever the number of turns.
  for (let k = 1; k <= 30; k++)
    if (backgroundOf(k) !== null) assert.equal(runs(k + 1)[0], '! pgrep -x tail', `after turn ${k}`);
});

test('plans chain: executing turns 1..n once each passes every assert and leaves expectedLog(n)', () => {
  for (const n of [1, 2, 5, 9]) {
    const plans = Array.from({ length: n }, (_, i) => turnPlan(2, i + 1, opts));
    assert.deepEqual(execute(plans), { file: expectedLog(n), state: n });
  }
});

test('a half-applied turn (k:a without k:b) makes the next turn fail its first assert', () => {
  const plans = [turnPlan(2, 1, opts), turnPlan(2, 2, opts)];
  const partial = { steps: plans[1]!.steps.filter((s) => 'append' in s).slice(0, 1) };
  assert.throws(() => execute([plans[0]!, partial, turnPlan(2, 2, opts)]), /assertFile/);
  assert.throws(
    () => execute([plans[0]!, plans[1]!, plans[1]!]),
    /assertFile/,
    'a duplicated turn is seen too',
  );
});

test('expectedLog', () => {
  assert.equal(expectedLog(0), '');
  assert.equal(expectedLog(2), '1:a\n1:b\n2:a\n2:b\n');
});

test('sleeps are deterministic, in range, and vary with seed, session and turn', () => {
  const all = new Set<number>();
  for (let s = 0; s < 20; s++) {
    for (let k = 1; k <= 20; k++) {
      const ms = sleepMs(7, s, k);
      assert.ok(ms >= MIN_SLEEP_MS && ms <= MAX_SLEEP_MS, `${ms} out of range`);
      assert.equal(ms, sleepMs(7, s, k));
      all.add(ms);
    }
  }
  assert.ok(all.size > 200, `only ${all.size} distinct sleeps in 400`);
  assert.notDeepEqual(
    [1, 2, 3, 4, 5].map((k) => sleepMs(1, 0, k)),
    [1, 2, 3, 4, 5].map((k) => sleepMs(2, 0, k)),
  );
  assert.deepEqual(turnPlan(5, 3, opts), turnPlan(5, 3, opts));
});

test('turn numbers start at 1', () => {
  assert.throws(() => turnPlan(0, 0, opts), RangeError);
  assert.throws(() => turnPlan(0, 1.5, opts), RangeError);
});
