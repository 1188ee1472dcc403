import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FaultKind } from './fault-timing.js';
import { CHAOS_INVARIANTS, type InvariantResult } from './invariant-result.js';
import { decideVerdict, faultKindsAsked, type VerdictInput } from './verdict.js';

const held = (name: string): InvariantResult => ({
  name,
  passed: true,
  summary: 'ok',
  details: [],
  excused: [],
});
const counts = (p: Partial<Record<FaultKind, number>>): Record<FaultKind, number> => ({
  'sandbox-kill': 0,
  'worker-kill': 0,
  'node-kill': 0,
  'blobs-kill': 0,
  'store-restart': 0,
  'store-failover': 0,
  partition: 0,
  ...p,
});

/** A PostgreSQL run with every fault kind asked for, each of which bit: it passes. */
const PASSING: VerdictInput = {
  invariants: CHAOS_INVARIANTS.map(held),
  requests: { fail: 0, unknown: 0, notSent: 0 },
  cutShort: false,
  asked: {
    killWorkers: 1,
    killNodes: 0,
    blobsDownMs: null,
    storeDownMs: 3000,
    storeFailovers: ['postmaster'],
    partitionMs: 6000,
  },
  injected: counts({
    'sandbox-kill': 5,
    'worker-kill': 1,
    'store-restart': 1,
    'store-failover': 1,
    partition: 1,
  }),
  bit: counts({ 'sandbox-kill': 2, 'worker-kill': 1, 'store-restart': 1, 'store-failover': 1, partition: 1 }),
  unexplainedAborts: [],
  partition: { sandboxesAliveAfterLease: 0, healed: true, lateCommitsAccepted: 0 },
  failovers: { asked: 1, injected: 1, recovered: 1 },
  notBack: { nodes: 0, blobs: false },
  longTurns: null,
};

const KILL_AT = Date.parse('2026-01-01T00:00:00.000Z');
const hitBy = (indices: number[], session = 'long-1') => ({
  session,
  abortedTurn: `turn_${session}`,
  fault: { kind: 'sandbox-kill' as const, at: KILL_AT },
  indices,
});

const CASES: { name: string; input: Partial<VerdictInput>; failures: RegExp[] }[] = [
  { name: 'everything held and every fault bit', input: {}, failures: [] },
  {
    name: 'the checker returned no invariants',
    input: { invariants: [] },
    failures: [
      /^the checker did not report the invariants exactly-one-reply, replies-in-order, .*no-orphan-processes$/,
    ],
  },
  {
    name: 'the checker left one invariant out and reported one it does not promise',
    input: {
      invariants: [...CHAOS_INVARIANTS.filter((name) => name !== 'replies-in-order'), 'replies-sorted'].map(
        held,
      ),
    },
    failures: [
      /^the checker did not report the invariants replies-in-order$/,
      /^the checker reported invariants it does not promise: replies-sorted$/,
    ],
  },
  {
    name: 'an invariant failed',
    input: {
      invariants: CHAOS_INVARIANTS.map((name) =>
        name === 'no-orphan-layers'
          ? { name, passed: false, summary: '1 layer', details: ['s/layers/t'], excused: [] }
          : held(name),
      ),
    },
    failures: [/^invariant no-orphan-layers failed: 1 layer$/],
  },
  {
    name: 'the run was cut short with messages never sent',
    input: { cutShort: true, requests: { fail: 0, unknown: 0, notSent: 7 } },
    failures: [/^the run was cut short/, /^7 planned messages were never sent$/],
  },
  {
    name: 'requests failed or ended unknown',
    input: { requests: { fail: 1, unknown: 2, notSent: 0 } },
    failures: [/^1 requests failed$/, /^2 requests ended unknown$/],
  },
  {
    name: 'sandbox kills (always asked for) never found a running turn',
    input: { bit: { ...PASSING.bit, 'sandbox-kill': 0 } },
    failures: [/^sandbox-kill: asked for, 5 injected, none found a running turn/],
  },
  {
    name: 'the worker kill landed on an idle worker',
    input: { bit: { ...PASSING.bit, 'worker-kill': 0 } },
    failures: [/^worker-kill: asked for, 1 injected, none found a running turn/],
  },
  {
    name: 'the worker kill never happened',
    input: { injected: { ...PASSING.injected, 'worker-kill': 0 }, bit: { ...PASSING.bit, 'worker-kill': 0 } },
    failures: [/^worker-kill: asked for, 0 injected/],
  },
  {
    name: 'the store restart found no running turn',
    input: { bit: { ...PASSING.bit, 'store-restart': 0 } },
    failures: [/^store-restart: asked for/],
  },
  {
    name: 'the partition cut a worker with no running turn',
    input: { bit: { ...PASSING.bit, partition: 0 } },
    failures: [/^partition: asked for/],
  },
  {
    name: 'a fault kind not asked for that did not bite is no failure',
    input: {
      asked: {
        killWorkers: 0,
        killNodes: 0,
        blobsDownMs: null,
        storeDownMs: null,
        storeFailovers: [],
        partitionMs: null,
      },
      bit: counts({ 'sandbox-kill': 1 }),
      partition: null,
      failovers: { asked: 0, injected: 0, recovered: 0 },
    },
    failures: [],
  },
  {
    name: 'an abort no injected fault explains',
    input: {
      unexplainedAborts: [
        {
          sessionId: 's1',
          turnId: 'turn_a',
          workerId: 'wrk_b',
          code: 'WORKER_FENCED',
          reason: 'worker stopped: lease lost',
        },
      ],
    },
    failures: [
      /^1 aborted turns no injected fault explains: s1 turn_a on wrk_b \(WORKER_FENCED: worker stopped/,
    ],
  },
  {
    name: 'many unexplained aborts are listed up to a cap',
    input: {
      unexplainedAborts: Array.from({ length: 12 }, (_, i) => ({
        sessionId: `s${i}`,
        turnId: `turn_${i}`,
        workerId: 'w',
        code: null,
        reason: '',
      })),
    },
    failures: [/^12 aborted turns .*s9 turn_9 on w \(no code: \); 2 more$/],
  },
  {
    name: 'the partitioned worker did not fence itself, nor heal, and a late commit was accepted',
    input: { partition: { sandboxesAliveAfterLease: 2, healed: false, lateCommitsAccepted: 1 } },
    failures: [
      /^partition: 2 sandboxes .* still ran a lease/,
      /^partition: the link did not/,
      /^partition: 1 commits/,
    ],
  },
  {
    name: 'a failover asked for did not happen',
    input: { failovers: { asked: 2, injected: 1, recovered: 1 } },
    failures: [/^store-failover: 2 asked for, 1 happened$/],
  },
  {
    name: 'a failover never saw a commit on the new primary',
    input: { failovers: { asked: 1, injected: 1, recovered: 0 } },
    failures: [/^store-failover: 1 of 1 never saw a new primary commit$/],
  },
  {
    name: 'a node kill and an S3 daemon kill asked for: each must bite, and what was killed must come back',
    input: {
      asked: { ...PASSING.asked, killNodes: 2, blobsDownMs: 5000 },
      injected: counts({ ...PASSING.injected, 'node-kill': 2, 'blobs-kill': 1 }),
      bit: counts({ ...PASSING.bit, 'node-kill': 0, 'blobs-kill': 1 }),
      notBack: { nodes: 1, blobs: true },
    },
    failures: [
      /^node-kill: asked for, 2 injected, none found a running turn/,
      /^node-kill: 1 killed nodes never came back$/,
      /^blobs-kill: the S3 daemon never came back$/,
    ],
  },
  {
    name: 'long turns: each fault that hit one cost at most one redone call',
    input: { longTurns: { perFault: [hitBy([]), hitBy([7], 'long-2')], unattributed: [] } },
    failures: [],
  },
  {
    name: 'long turns: a fault cost two redone calls, named with the session and their indices',
    input: { longTurns: { perFault: [hitBy([4, 5])], unattributed: [] } },
    failures: [
      /^long turns: long-1 redid 2 model calls after sandbox-kill at 2026-01-01T00:00:00.000Z \(turn turn_long-1\): calls 4, 5; at most one per fault$/,
    ],
  },
  {
    name: 'long turns: a call redone before any fault, and no fault hit a long turn',
    input: {
      longTurns: {
        perFault: [{ ...hitBy([]), fault: null }],
        unattributed: [{ session: 'long-3', turn: 1, index: 2, at: KILL_AT }],
      },
    },
    failures: [
      /^long turns: no fault hit one/,
      /^long turns: 1 model calls redone before any fault hit their session: long-3 call 2$/,
    ],
  },
];

for (const c of CASES) {
  test(`decideVerdict: ${c.name}`, () => {
    const v = decideVerdict({ ...PASSING, ...c.input });
    assert.equal(v.passed, c.failures.length === 0, JSON.stringify(v.failures));
    assert.equal(v.failures.length, c.failures.length, JSON.stringify(v.failures));
    for (const [i, re] of c.failures.entries()) assert.match(v.failures[i]!, re);
  });
}

test('faultKindsAsked: sandbox kills always, the others when the settings ask', () => {
  assert.deepEqual(
    faultKindsAsked({
      killWorkers: 0,
      killNodes: 0,
      blobsDownMs: null,
      storeDownMs: null,
      storeFailovers: [],
      partitionMs: null,
    }),
    ['sandbox-kill'],
  );
  assert.deepEqual(faultKindsAsked(PASSING.asked), [
    'sandbox-kill',
    'worker-kill',
    'store-restart',
    'store-failover',
    'partition',
  ]);
});
