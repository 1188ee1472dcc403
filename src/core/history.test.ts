import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  chainBytes,
  compactionCut,
  objectsOfVersion,
  type RetentionPolicy,
  retainedVersions,
  retentionFloor,
} from './history.js';
import type { ChainEntry, WorkspaceChain } from './types.js';

const BASE = 1_700_000_000_000;
const DAY = 24 * 3_600_000;

const layer = (version: number, key = `l${version}`): ChainEntry => ({
  version,
  kind: 'layer',
  key,
  size: 10,
  turnId: `t${version}`,
});
const snapshot = (version: number, key = `s${version}`, rewoundTo?: number): ChainEntry => ({
  version,
  kind: 'snapshot',
  key,
  size: 100,
  turnId: null,
  ...(rewoundTo === undefined ? {} : { rewoundTo }),
});
const chainOf = (version: number, history: ChainEntry[]): WorkspaceChain => ({
  sessionId: 's',
  version,
  entries: [],
  history,
});

test('objectsOfVersion: the snapshot at or before the version, then its layers; null when dropped', () => {
  // 2 compacted; a rewind at 5 to version 3 names s2 and l3 again.
  const rows = [
    snapshot(2),
    layer(3),
    layer(4),
    snapshot(5, 's2', 3),
    { ...snapshot(5, 'l3', 3), size: 10 },
    layer(6),
  ];
  const chain = chainOf(7, rows);
  const cases: [string, number, string[] | null][] = [
    ['before the compaction', 1, null],
    ['the compaction’s own version', 2, ['s2']],
    ['a layer after it', 4, ['s2', 'l3', 'l4']],
    ['the rewind’s version', 5, ['s2', 'l3']],
    ['after the rewind', 6, ['s2', 'l3', 'l6']],
    ['a version that changed nothing', 7, ['s2', 'l3', 'l6']],
    ['not reached', 8, null],
  ];
  for (const [name, version, keys] of cases)
    assert.deepEqual(objectsOfVersion(chain, version)?.map((e) => e.key) ?? null, keys, name);
  assert.deepEqual(retainedVersions(chain), { oldest: 2, newest: 7 });
  assert.deepEqual(chainBytes(chain), { objects: 4, bytes: 130 }, 'each object once');
});

test('retainedVersions: a rewind’s snapshot drops nothing, so history reaches back to 0', () => {
  const chain = chainOf(4, [layer(1), layer(2), snapshot(3, 'l1', 1), layer(4)]);
  assert.deepEqual(retainedVersions(chain), { oldest: 0, newest: 4 });
  assert.deepEqual(objectsOfVersion(chain, 0), []);
  assert.deepEqual(
    objectsOfVersion(chain, 2)?.map((e) => e.key),
    ['l1', 'l2'],
  );
  assert.equal(retainedVersions(chain, true), null, 'a resident workspace keeps none');
});

test('retentionFloor: the oldest version each policy keeps when a snapshot is recorded', () => {
  const rows = [1, 2, 3, 4, 5, 6].map((v) => ({ version: v, createdAt: BASE - (7 - v) * DAY }));
  const cases: [string, RetentionPolicy, number][] = [
    ['default: the snapshot’s version', undefined, 5],
    ['all: every version', { all: true }, 0],
    ['the last 3 of 6', { versions: 3 }, 4],
    ['the last 10 of 6: all', { versions: 10 }, 0],
    ['2.5 days: the versions recorded since', { days: 2.5 }, 5],
    ['0.5 days: none recorded since, the snapshot’s', { days: 0.5 }, 5],
    ['30 days: every one', { days: 30 }, 1],
  ];
  for (const [name, policy, floor] of cases)
    assert.equal(
      retentionFloor(policy, { snapshotVersion: 5, currentVersion: 6, rows, now: BASE }),
      floor,
      name,
    );
});

test('compactionCut: the newest snapshot of compaction at or before the floor', () => {
  const rows = [
    { version: 2, kind: 'snapshot' as const, rewound: false },
    { version: 3, kind: 'layer' as const, rewound: false },
    { version: 4, kind: 'snapshot' as const, rewound: true },
    { version: 6, kind: 'snapshot' as const, rewound: false },
  ];
  const cases: [string, number, number | null][] = [
    ['before any snapshot: nothing goes', 1, null],
    ['at the first', 2, 2],
    ['a rewind’s snapshot is no cut', 5, 2],
    ['the newest', 6, 6],
    ['past it', 9, 6],
  ];
  for (const [name, floor, cut] of cases) assert.equal(compactionCut(rows, floor), cut, name);
});
