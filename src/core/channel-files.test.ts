import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ChannelFileUse, neededChannelFiles } from './channel-files.js';

test('neededChannelFiles: a file is kept while a message not yet done with or an unsent outbox row names it', () => {
  const uses: ChannelFileUse[] = [
    { key: 'in/pending', holder: 'message', status: 'pending' },
    { key: 'in/processing', holder: 'message', status: 'processing' },
    { key: 'in/done', holder: 'message', status: 'done' },
    { key: 'in/failed', holder: 'message', status: 'failed' },
    { key: 'in/cancelled', holder: 'message', status: 'cancelled' },
    { key: 'in/interrupted', holder: 'message', status: 'interrupted' },
    { key: 'out/pending', holder: 'outbox', status: 'pending' },
    { key: 'out/sent', holder: 'outbox', status: 'sent' },
    { key: 'out/dead', holder: 'outbox', status: 'dead' },
    // One file named twice: a done row does not free what a live row still needs.
    { key: 'shared', holder: 'message', status: 'done' },
    { key: 'shared', holder: 'message', status: 'pending' },
  ];
  assert.deepEqual([...neededChannelFiles(uses)].sort(), [
    'in/pending',
    'in/processing',
    'out/pending',
    'shared',
  ]);
  assert.equal(neededChannelFiles([]).size, 0, 'no row: every file is garbage (past the grace)');
});
