import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decideResidentWorkspace, type ResidentWorkspaceSnapshot } from './resident-workspace.js';

const BASE = 1_700_000_000_000;
const HERE = { id: 'dd-here', name: 'm1:/var/lib/berth' };
const held = (holder: string | null, epoch = 0, capturedVersion: number | null = null) => ({
  holder,
  holderName: holder === null ? null : `${holder === HERE.id ? 'm1' : 'm2'}:/var/lib/berth`,
  writtenAt: holder === null ? null : BASE,
  capturedVersion,
  capturedAt: capturedVersion === null ? null : BASE + 1,
  epoch,
});
const marker = (holder: string, epoch = 0, sessionId = 's1') => ({ sessionId, holder, epoch });

test('decideResidentWorkspace: a turn runs only where the store and the data dir agree', () => {
  const cases: {
    name: string;
    record: ResidentWorkspaceSnapshot['record'];
    marker: ResidentWorkspaceSnapshot['marker'];
    expected: ReturnType<typeof decideResidentWorkspace>['action'];
    emptyFirst?: boolean;
  }[] = [
    {
      name: 'a new session: taken here',
      record: held(null),
      marker: null,
      expected: 'take',
      emptyFirst: false,
    },
    {
      name: 'crash between the marker and the store: taken, files kept',
      record: held(null),
      marker: marker(HERE.id),
      expected: 'take',
      emptyFirst: false,
    },
    {
      name: 'reset since the marker was written: taken, emptied first',
      record: held(null, 1),
      marker: marker(HERE.id, 0),
      expected: 'take',
      emptyFirst: true,
    },
    {
      name: 'another session’s marker does not count',
      record: held(null, 1),
      marker: marker(HERE.id, 0, 'other'),
      expected: 'take',
      emptyFirst: false,
    },
    {
      name: 'held here, marker here: used (a restart on the same disk)',
      record: held(HERE.id),
      marker: marker(HERE.id),
      expected: 'use',
    },
    { name: 'held by another data dir', record: held('dd-there'), marker: null, expected: 'refuse' },
    {
      name: 'held by another data dir, stale marker here',
      record: held('dd-there', 1),
      marker: marker(HERE.id, 0),
      expected: 'refuse',
    },
    { name: 'held here but the files are gone', record: held(HERE.id), marker: null, expected: 'refuse' },
    {
      name: 'held here, marker of an older epoch',
      record: held(HERE.id, 2),
      marker: marker(HERE.id, 1),
      expected: 'refuse',
    },
    {
      name: 'held by another data dir, its chain captured at the current version: materialised here',
      record: held('dd-there', 0, 3),
      marker: null,
      expected: 'materialise',
    },
    {
      name: 'held here but the files are gone, captured at the current version: materialised again',
      record: held(HERE.id, 0, 3),
      marker: null,
      expected: 'materialise',
    },
    {
      name: 'held by another data dir, a commit after its last capture: refused (never older files)',
      record: held('dd-there', 0, 2),
      marker: null,
      expected: 'refuse',
    },
    {
      name: 'held here, marker here, captured: used in place (no download)',
      record: held(HERE.id, 0, 3),
      marker: marker(HERE.id),
      expected: 'use',
    },
  ];
  for (const c of cases) {
    const decision = decideResidentWorkspace({
      sessionId: 's1',
      record: c.record,
      version: 3,
      dataDir: HERE,
      marker: c.marker,
    });
    assert.equal(decision.action, c.expected, c.name);
    if (decision.action === 'take') assert.equal(decision.emptyFirst, c.emptyFirst, c.name);
  }
});

test('decideResidentWorkspace: the refusal names the holder and the time of its last write', () => {
  const decision = decideResidentWorkspace({
    sessionId: 's1',
    record: held('dd-there'),
    version: 3,
    dataDir: HERE,
    marker: null,
  });
  assert.equal(decision.action, 'refuse');
  if (decision.action !== 'refuse') return;
  assert.match(decision.message, /m2:\/var\/lib\/berth/);
  assert.match(
    decision.message,
    new RegExp(`${new Date(BASE).toISOString()} \\(workspace version 3; no capture in its chain\\)`),
  );
  assert.match(decision.message, /m1:\/var\/lib\/berth does not hold it/);
});
