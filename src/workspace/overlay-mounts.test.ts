/** The per-turn mount operations through this process's syscall helper, on real overlayfs. */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { isMountPoint, mountOverlay, unmountAll } from './overlay-mounts.js';

test('mountOverlay and unmountAll: stacked mounts all come off; unmounting nothing (or a missing path) is a no-op', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-mounts-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const d = (name: string) => join(dir, name);
  for (const name of ['lower', 'u1', 'w1', 'u2', 'w2', 'merged']) await mkdir(d(name));
  await writeFile(join(d('lower'), 'f'), 'committed');
  await mountOverlay(d('merged'), { lower: d('lower'), upper: d('u1'), work: d('w1') });
  await mountOverlay(d('merged'), { lower: d('lower'), upper: d('u2'), work: d('w2') });
  assert.equal(await readFile(join(d('merged'), 'f'), 'utf8'), 'committed');
  assert.equal(await isMountPoint(d('merged')), true);
  await unmountAll(d('merged'));
  assert.equal(await isMountPoint(d('merged')), false, 'both stacked overlays are gone');
  await unmountAll(d('merged'));
  await unmountAll(d('missing'));
  await assert.rejects(
    mountOverlay(d('merged'), { lower: d('nope'), upper: d('u1'), work: d('w1') }),
    /mount overlay on .*merged/,
    'a failed mount names what it tried',
  );
});
