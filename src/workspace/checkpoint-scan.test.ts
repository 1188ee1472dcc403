import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type CheckpointIndex, checkpointDelta } from './checkpoint-scan.js';
import type { PlanStep } from './promotion.js';

const idx = (entries: [string, string][]): CheckpointIndex => new Map(entries);
const file = (v: string) => `f:33188:1000:1000:${v}`;
const dir = 'd:16877:1000:1000';

const CASES: { name: string; before: CheckpointIndex; after: CheckpointIndex; steps: PlanStep[] }[] = [
  { name: 'nothing changed', before: idx([['a', file('1')]]), after: idx([['a', file('1')]]), steps: [] },
  {
    name: 'a changed file is sent again, an unchanged one is not',
    before: idx([
      ['a', file('1')],
      ['b', file('1')],
    ]),
    after: idx([
      ['a', file('2')],
      ['b', file('1')],
    ]),
    steps: [{ op: 'move', from: 'a', path: 'a' }],
  },
  {
    name: 'a file of the turn removed is deleted',
    before: idx([['tmp', file('1')]]),
    after: idx([]),
    steps: [{ op: 'delete', path: 'tmp' }],
  },
  {
    name: 'a committed file removed is deleted once, not again at the next checkpoint',
    before: idx([]),
    after: idx([['old', 'x']]),
    steps: [{ op: 'delete', path: 'old' }],
  },
  {
    name: 'a deletion already checkpointed',
    before: idx([['old', 'x']]),
    after: idx([['old', 'x']]),
    steps: [],
  },
  {
    name: 'a dir removed: one delete for the tree under it, before what is new',
    before: idx([
      ['d', dir],
      ['d/x', file('1')],
    ]),
    after: idx([['n', file('1')]]),
    steps: [
      { op: 'delete', path: 'd' },
      { op: 'move', from: 'n', path: 'n' },
    ],
  },
  {
    name: 'a new dir comes before its files',
    before: idx([]),
    after: idx([
      ['d', dir],
      ['d/x', file('1')],
    ]),
    steps: [
      { op: 'mkdir', path: 'd', mode: 0o755, uid: 1000, gid: 1000 },
      { op: 'move', from: 'd/x', path: 'd/x' },
    ],
  },
];

for (const c of CASES)
  test(`checkpointDelta: ${c.name}`, () => {
    assert.deepEqual(checkpointDelta(c.before, c.after).steps, c.steps);
  });
