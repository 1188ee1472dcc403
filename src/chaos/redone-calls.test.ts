import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SANDBOX_KILL, turnRow } from '../../test/helpers/turn-row.js';
import type { OutageEvidence } from './fault-timing.js';
import { redoneByFault, redoneCalls } from './redone-calls.js';
import type { ModelCall } from './scripted-model.js';

const EVIDENCE: OutageEvidence = { leaseMs: 1000, selfFences: [], storeRetryBudgetMs: 3000 };
/** A call of long-1's turn 1, answered 10 ms after it came (null: never answered). */
const call = (index: number, receivedAt: number, answered: number | null = receivedAt + 10): ModelCall => ({
  session: 'long-1',
  turn: 1,
  index,
  receivedAt,
  answeredAt: answered,
});
const kill = SANDBOX_KILL;
/** long-1's first attempt, killed at 1500 (aborted at 1600), and its retry from 2000. */
const TURNS = [
  turnRow({ id: 'first', sessionId: 'long-1', status: 'aborted', startedAt: 1000, endedAt: 1600 }),
  turnRow({ id: 'retry', sessionId: 'long-1', attempt: 2, startedAt: 2000, endedAt: 3000 }),
];

const CASES: { name: string; calls: ModelCall[]; redone: number[] }[] = [
  {
    name: 'each call once: nothing redone',
    calls: [call(0, 1000), call(1, 1100), call(2, 2100)],
    redone: [],
  },
  {
    // The retry resumes at call 2, whose answer never came (or was journalled and never reached the model).
    name: 'a call whose answer never came, asked again',
    calls: [call(0, 1000), call(1, 1100), call(2, 1400, null), call(2, 2100)],
    redone: [],
  },
  {
    name: 'the one call answered but not journalled, asked again',
    calls: [call(0, 1000), call(1, 1100), call(1, 2100), call(2, 2200)],
    redone: [1],
  },
  {
    name: 'a resume from an older checkpoint: two calls redone',
    calls: [call(0, 1000), call(1, 1100), call(2, 1200), call(1, 2100), call(2, 2200), call(3, 2300)],
    redone: [1, 2],
  },
  {
    name: 'the same index of another session or turn is not a redo',
    calls: [call(0, 1000), { ...call(0, 2100), session: 'long-2' }, { ...call(0, 2200), turn: 2 }],
    redone: [],
  },
  {
    name: 'a request that came while the first answer was still being written is not a redo of it',
    calls: [call(0, 1000, 1300), call(0, 1200)],
    redone: [],
  },
];

for (const c of CASES) {
  test(`redoneCalls: ${c.name}`, () => {
    assert.deepEqual(
      redoneCalls(c.calls).map((r) => r.index),
      c.redone,
    );
    const { perFault, unattributed } = redoneByFault(c.calls, TURNS, [kill], EVIDENCE);
    assert.deepEqual(unattributed, []);
    assert.deepEqual(perFault, [
      {
        session: 'long-1',
        abortedTurn: 'first',
        fault: { kind: 'sandbox-kill', at: 1500 },
        indices: c.redone,
      },
    ]);
  });
}

test('redoneByFault: each redone call is charged to the latest abort before it, or to none', () => {
  const second = turnRow({
    id: 'second',
    sessionId: 'long-1',
    attempt: 2,
    status: 'aborted',
    sandbox: 'berth-x-s1-g2',
    startedAt: 2000,
    endedAt: 2600,
  });
  const calls = [call(0, 500), call(0, 900), call(1, 1100), call(1, 2100), call(2, 2200), call(2, 2700)];
  const { perFault, unattributed } = redoneByFault(calls, [TURNS[0]!, second], [kill], EVIDENCE);
  assert.deepEqual(
    perFault.map((f) => [f.abortedTurn, f.fault?.kind ?? null, f.indices]),
    [
      ['first', 'sandbox-kill', [1]],
      // No fault was in effect in the second sandbox: the abort is listed without one.
      ['second', null, [2]],
    ],
  );
  assert.deepEqual(unattributed, [{ session: 'long-1', turn: 1, index: 0, at: 900 }]);
});
