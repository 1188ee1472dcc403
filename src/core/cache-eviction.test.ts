import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type CacheEntry, decideCacheEvictions } from './cache-eviction.js';

const BASE = 1_700_000_000_000;
const MiB = 2 ** 20;

function entry(
  sessionId: string,
  mib: number,
  usedSecondsAgo: number,
  flags: Partial<CacheEntry> = {},
): CacheEntry {
  return {
    sessionId,
    bytes: mib * MiB,
    lastUsedAt: BASE - usedSecondsAgo * 1000,
    pinned: false,
    resident: false,
    hasLayers: false,
    held: true,
    ...flags,
  };
}

test('decideCacheEvictions gives up the least recently used copies that are not in use, until under the budget', () => {
  const cases: {
    name: string;
    entries: CacheEntry[];
    budgetMib: number;
    expected: ReturnType<typeof decideCacheEvictions>;
  }[] = [
    {
      name: 'under the budget: nothing',
      entries: [entry('a', 2, 10), entry('b', 2, 5)],
      budgetMib: 4,
      expected: { action: 'keep', totalBytes: 4 * MiB },
    },
    {
      name: 'no budget (0): nothing, however full',
      entries: [entry('a', 200, 10)],
      budgetMib: 0,
      expected: { action: 'keep', totalBytes: 200 * MiB },
    },
    {
      name: 'over: oldest first, only as many as needed',
      entries: [entry('new', 2, 1), entry('old', 2, 30), entry('mid', 2, 20)],
      budgetMib: 3,
      expected: {
        action: 'evict',
        sessionIds: ['old', 'mid'],
        totalBytes: 6 * MiB,
        freedBytes: 4 * MiB,
        stillOver: false,
      },
    },
    {
      name: 'pinned, resident, layered and already evicted copies are never taken, however old',
      entries: [
        entry('gone', 0, 200, { held: false }),
        entry('bound', 2, 100, { pinned: true }),
        entry('resident', 2, 90, { resident: true }),
        entry('layers', 2, 80, { hasLayers: true }),
        entry('idle', 2, 1),
      ],
      budgetMib: 7,
      expected: {
        action: 'evict',
        sessionIds: ['idle'],
        totalBytes: 8 * MiB,
        freedBytes: 2 * MiB,
        stillOver: false,
      },
    },
    {
      name: 'everything evictable is not enough: evicted all the same, and said so',
      entries: [entry('bound', 10, 5, { pinned: true }), entry('idle', 1, 1)],
      budgetMib: 4,
      expected: {
        action: 'evict',
        sessionIds: ['idle'],
        totalBytes: 11 * MiB,
        freedBytes: 1 * MiB,
        stillOver: true,
      },
    },
    {
      name: 'nothing evictable: kept',
      entries: [entry('bound', 10, 5, { pinned: true }), entry('resident', 10, 5, { resident: true })],
      budgetMib: 4,
      expected: { action: 'keep', totalBytes: 20 * MiB },
    },
    {
      name: 'same last use: by session id, so two workers on one data dir agree',
      entries: [entry('b', 2, 5), entry('a', 2, 5)],
      budgetMib: 2,
      expected: {
        action: 'evict',
        sessionIds: ['a'],
        totalBytes: 4 * MiB,
        freedBytes: 2 * MiB,
        stillOver: false,
      },
    },
  ];
  for (const c of cases)
    assert.deepEqual(decideCacheEvictions(c.entries, c.budgetMib * MiB), c.expected, c.name);
});
