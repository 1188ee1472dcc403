/** The history commands' rendering: a unified diff, coloured only when asked, with sizes for what has no text; the turns table. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Turn, TurnDiff } from '../core/index.js';
import { renderDiff, renderHistory, renderWorkspaceSummary } from './history-command.js';

const file = { type: 'file' as const, mode: 0o644 };
const DIFF: TurnDiff & { turnId: string | null; rewoundTo?: number } = {
  turnId: 'turn_x',
  version: 2,
  truncated: true,
  counts: { added: 0, modified: 3, deleted: 0, renamed: 1 },
  files: [
    {
      path: 'a.txt',
      change: 'modified',
      before: { ...file, size: 4 },
      after: { ...file, size: 4, mode: 0o755 },
      binary: false,
      diff: '@@ -1 +1 @@\n-one\n+two\n',
    },
    {
      path: 'big.log',
      change: 'modified',
      before: { ...file, size: 9e6 },
      after: { ...file, size: 9e6 + 1 },
      binary: false,
      truncated: true,
    },
    {
      path: 'img.bin',
      change: 'modified',
      before: { ...file, size: 6 },
      after: { ...file, size: 8 },
      binary: true,
    },
    {
      path: 'new.txt',
      change: 'renamed',
      from: 'old.txt',
      before: { ...file, size: 3 },
      after: { ...file, size: 3 },
      binary: false,
      diff: '',
    },
  ],
};

test('renderDiff: headers, hunks, modes, renames, binary and truncated files as sizes; plain without colour', () => {
  const plain = renderDiff(DIFF, false);
  assert.equal(
    plain,
    [
      'diff --berth a/a.txt b/a.txt',
      'old mode 100644',
      'new mode 100755',
      '--- a/a.txt',
      '+++ b/a.txt',
      '@@ -1 +1 @@',
      '-one',
      '+two',
      'diff --berth a/big.log b/big.log',
      'Text diff left out (truncated: 9000000 bytes -> 9000001 bytes)',
      'diff --berth a/img.bin b/img.bin',
      'Binary files differ (6 bytes -> 8 bytes)',
      'diff --berth a/old.txt b/new.txt',
      'rename from old.txt',
      'rename to new.txt',
      'version 2 (turn turn_x): 4 files changed — 0 added, 3 modified, 0 deleted, 1 renamed; some text diffs left out (truncated)',
      '',
    ].join('\n'),
  );
  const coloured = renderDiff(DIFF, true);
  assert.ok(coloured.includes('\x1b[31m-one\x1b[0m') && coloured.includes('\x1b[32m+two\x1b[0m'));
  assert.ok(coloured.includes('\x1b[36m@@ -1 +1 @@\x1b[0m'));
});

test('renderHistory: the version a commit made, an aborted attempt with its code', () => {
  const base = {
    sessionId: 's',
    generation: 1,
    workerId: 'w',
    sandbox: null,
    progress: null,
    messageIds: [1],
    interruptRequestedAt: null,
  };
  const turns: Turn[] = [
    {
      ...base,
      id: 'turn_a',
      attempt: 1,
      status: 'aborted',
      error: 'killed',
      errorCode: 'SANDBOX_EXITED',
      baseVersion: null,
      startedAt: 0,
      endedAt: 5,
    },
    {
      ...base,
      id: 'turn_b',
      attempt: 2,
      status: 'committed',
      error: null,
      errorCode: null,
      baseVersion: 0,
      startedAt: 10,
      endedAt: 30,
    },
  ];
  const lines = renderHistory(turns).split('\n');
  assert.match(
    lines[0]!,
    /^VERSION\s+STATUS\s+MESSAGES\s+STARTED \(UTC\)\s+DURATION\s+ATTEMPT\s+TURN\s+ERROR$/,
  );
  assert.match(
    lines[1]!,
    /^-\s+aborted SANDBOX_EXITED\s+#1\s+1970-01-01 00:00:00\s+5 ms\s+1\s+turn_a\s+killed$/,
  );
  assert.match(lines[2]!, /^1\s+committed\s+#1\s+1970-01-01 00:00:00\s+20 ms\s+2\s+turn_b$/);
});

test('renderWorkspaceSummary: the versions kept, the policy, the bytes in the blob store', () => {
  const base = { sessionId: 's', version: 9, objects: 3, bytes: 3 * 1024 * 1024 + 512, rewinds: [] };
  assert.equal(
    renderWorkspaceSummary({ ...base, retained: { oldest: 4, newest: 9 }, retention: null }),
    'workspace: version 9, versions 4-9 retained (retention: since the newest snapshot); 3 objects, 3.0 MiB (3146240 bytes) in the blob store',
  );
  assert.match(
    renderWorkspaceSummary({ ...base, retained: { oldest: 0, newest: 9 }, retention: { versions: 5 } }),
    /versions 0-9 retained \(retention: the last 5\)/,
  );
  assert.match(
    renderWorkspaceSummary({ ...base, objects: 1, bytes: 10, retained: null, retention: null }),
    /no versions \(written in place\).*1 object, 10 B in/,
  );
  assert.match(
    renderWorkspaceSummary({
      ...base,
      retained: null,
      retention: null,
      rewinds: [{ version: 6, toVersion: 3 }],
    }),
    /in the blob store\nversion 6: rewound to version 3$/,
  );
});
