import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import type { ScriptPlan } from '../core/index.js';
import {
  burstSizes,
  expectedLog,
  MAX_BURST,
  MAX_SLEEP_MS,
  MIN_BURST,
  MIN_SLEEP_MS,
  sleepMs,
  turnPlan,
} from './workload.js';

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

test('turns 3n and 3n+1 leave a tail running (redirected, holding the output); the first turn of each later burst checks none survived', () => {
  // With seed 42 session 1's bursts are 2, 5, 3: they start at turns 1, 3 and 8.
  assert.deepEqual(burstSizes(10, 42, 1), [2, 5, 3]);
  const kinds = (k: number) => turnPlan(1, k, opts).steps.map((s) => Object.keys(s)[0]);
  const runs = (k: number) => turnPlan(1, k, opts).steps.flatMap((s) => ('run' in s ? [s.run] : []));
  assert.deepEqual(kinds(1), ['assertFile', 'assertState', 'append', 'sleep', 'run', 'append', 'putState']);
  assert.deepEqual(kinds(2), ['assertFile', 'assertState', 'append', 'sleep', 'append', 'putState']);
  assert.deepEqual(kinds(3), [
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
  assert.deepEqual(runs(2), [], 'turn 2 may share its turn with turn 1, whose tail then still runs');
  assert.deepEqual(runs(3), ['! pgrep -x tail', 'tail -f log.txt > /dev/null 2>&1 &']);
  assert.deepEqual(runs(4), ['tail -f log.txt &']);
  assert.deepEqual(runs(5), []);
  assert.deepEqual(runs(8), ['! pgrep -x tail']);
  // Exactly the first turn of every burst but the first checks, whatever the number of turns.
  for (const [seed, session] of [
    [1, 0],
    [7, 3],
    [42, 1],
  ] as const) {
    const starts = [1];
    for (const size of burstSizes(30, seed, session)) starts.push(starts.at(-1)! + size);
    for (let k = 2; k <= 30; k++) {
      const checks = turnPlan(session, k, { ...opts, seed }).steps.some(
        (s) => 'run' in s && s.run === '! pgrep -x tail',
      );
      assert.equal(checks, starts.includes(k), `seed ${seed} session ${session} turn ${k}`);
    }
  }
});

test('bursts: 2 to 5 turns each, the last cut short, adding up to the turns; deterministic and varied', () => {
  const all = new Set<string>();
  for (let s = 0; s < 20; s++) {
    for (const turns of [1, 2, 7, 30]) {
      const sizes = burstSizes(turns, 7, s);
      assert.equal(
        sizes.reduce((a, b) => a + b, 0),
        turns,
      );
      for (const size of sizes.slice(0, -1)) assert.ok(size >= MIN_BURST && size <= MAX_BURST, `${size}`);
      assert.ok(sizes.at(-1)! >= 1 && sizes.at(-1)! <= MAX_BURST);
      assert.deepEqual(sizes, burstSizes(turns, 7, s));
      // A longer run begins with the same bursts: its first burst boundaries do not depend on its length.
      assert.deepEqual(sizes.slice(0, -1), burstSizes(30, 7, s).slice(0, sizes.length - 1));
    }
    all.add(burstSizes(30, 7, s).join(','));
  }
  assert.equal(all.size, 20, 'every session bursts its own way');
  for (let size = MIN_BURST; size <= MAX_BURST; size++)
    assert.ok(
      [...all].some((b) => b.split(',').includes(String(size))),
      `a burst of ${size}`,
    );
  assert.notDeepEqual(burstSizes(30, 1, 0), burstSizes(30, 2, 0));
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
