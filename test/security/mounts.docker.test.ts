/**
 * Extra read-only data mounts against real sandboxes (issue 6, item 3): what the allowlist
 * admits is readable and read-only inside; a symlink in a mount cannot reach the host; an
 * agent whose mount is not allowed is refused at create with the reason; a symlink swapped
 * after create is caught when the sandbox starts, and the turn fails for good.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startTestHost } from '../helpers/test-host.js';

test('extra mounts: allowlisted, read-only, no symlink escape, refused with the reason otherwise', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-mounts-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const root = join(dir, 'datasets');
  const outside = join(dir, 'host-only');
  await mkdir(join(root, 'corpus'), { recursive: true });
  await mkdir(join(root, '.aws'), { recursive: true });
  await mkdir(outside, { recursive: true });
  await writeFile(join(root, 'corpus', 'a.txt'), 'corpus data\n');
  await writeFile(join(outside, 'secret.txt'), 'host secret\n');
  await symlink(join(outside, 'secret.txt'), join(root, 'corpus', 'escape')); // absolute, to a host file
  await symlink(join(root, 'corpus'), join(dir, 'swappable'));
  const allowlist = join(dir, 'mount-allowlist.json');
  await writeFile(allowlist, JSON.stringify({ allowedRoots: [{ path: root, description: 'test data' }] }));

  const { client, sendAndCollect } = await startTestHost(t, { BERTH_MOUNT_ALLOWLIST: allowlist });
  const create = (name: string, hostPath: string, containerPath = 'corpus') =>
    client
      .request('POST', '/v1/agents', { name, provider: 'command', mounts: [{ hostPath, containerPath }] })
      .then(
        () => 'created',
        (err: Error) => err.message,
      );

  assert.match(await create('blocked', join(root, '.aws')), /MOUNT_NOT_ALLOWED|blocked pattern "\.aws"/);
  assert.match(await create('outside', outside), /under no allowed root/);
  assert.match(await create('bad-target', join(root, 'corpus'), '../etc'), /containerPath/);
  assert.equal(await create('reader', join(root, 'corpus')), 'created');
  assert.equal(await create('swapped', join(dir, 'swappable')), 'created');

  const job = [
    'cat /data/corpus/a.txt',
    'touch /data/corpus/new 2>/dev/null || echo "write: refused"',
    'cat /data/corpus/escape 2>/dev/null || echo "symlink: no host file"',
    "grep ' /data/corpus ' /proc/self/mounts | cut -d' ' -f4 | cut -d, -f1",
  ].join('; ');
  const events = await sendAndCollect('m1', { agent: 'reader', text: job }, (e) =>
    ['reply', 'failed'].includes(e.type),
  );
  assert.equal(events.at(-1)?.data.text, 'corpus data\nwrite: refused\nsymlink: no host file\nro\n');

  // The symlink the agent was created with now points out of the allowed root.
  await unlink(join(dir, 'swappable'));
  await symlink(outside, join(dir, 'swappable'));
  const swapped = await sendAndCollect('m2', { agent: 'swapped', text: 'cat /data/corpus/secret.txt' }, (e) =>
    ['reply', 'failed'].includes(e.type),
  );
  const last = swapped.at(-1)!;
  assert.equal(last.type, 'failed');
  assert.equal(last.data.code, 'MOUNT_NOT_ALLOWED');
  assert.match(String(last.data.error), /under no allowed root/);
  assert.equal(last.data.tries, 1, 'terminal: not retried');
});
