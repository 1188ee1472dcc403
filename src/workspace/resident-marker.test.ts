import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { workspaceLayout } from './layout.js';
import { emptyResidentWorkspace, readResidentMarker, writeResidentMarker } from './resident-marker.js';

test('a resident marker reads back as written; absent or unreadable reads as null; a reset empties the files, not the marker', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-marker-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const layout = workspaceLayout(dir);
  assert.equal(await readResidentMarker(layout, 's1'), null, 'absent');
  const marker = { sessionId: 's1', holder: 'dd_1', epoch: 2 };
  await writeResidentMarker(layout, marker);
  assert.deepEqual(await readResidentMarker(layout, 's1'), marker);
  for (const text of ['{not json', '{"sessionId":"s1","holder":"dd_1"}']) {
    await writeFile(layout.residentMarkerPath('s1'), text);
    assert.equal(await readResidentMarker(layout, 's1'), null, text);
  }
  await writeResidentMarker(layout, marker);
  await mkdir(join(layout.committedPath('s1'), 'sub'), { recursive: true });
  await writeFile(join(layout.committedPath('s1'), 'sub', 'f.txt'), 'old');
  await emptyResidentWorkspace(layout, 's1');
  assert.deepEqual(await readdir(layout.sessionDir('s1')), ['resident.holder']);
});
