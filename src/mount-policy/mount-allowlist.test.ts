import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { agentSpecSchema, isBerthError } from '../core/index.js';
import { blockedPatternIn, resolveMounts } from './mount-allowlist.js';

test('mount allowlist: realpath under an allowed root, no blocked pattern, read from the file each time', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-allow-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const root = join(dir, 'root');
  const outside = join(dir, 'outside');
  for (const d of [
    join(root, 'data'),
    join(root, 'proj', '.ssh'),
    join(root, 'creds', 'aws-credentials'),
    outside,
  ])
    await mkdir(d, { recursive: true });
  await writeFile(join(root, 'file.txt'), 'x');
  await symlink(outside, join(root, 'escape'));
  await symlink(join(root, 'data'), join(dir, 'link-in'));
  const file = join(dir, 'mount-allowlist.json');
  const mount = (hostPath: string) => [{ hostPath, containerPath: 'ds' }];
  const refused = async (hostPath: string, reason: RegExp) =>
    assert.rejects(resolveMounts(mount(hostPath), file), (err) => {
      assert.ok(isBerthError(err, 'MOUNT_NOT_ALLOWED'), String(err));
      assert.match(err.message, reason);
      return true;
    });

  assert.deepEqual(await resolveMounts([], file), [], 'no mounts: the file is not needed');
  await refused(join(root, 'data'), /no mount allowlist at .*mount-allowlist\.json/);

  await writeFile(file, JSON.stringify({ allowedRoots: [{ path: root }], blockedPatterns: ['secret'] }));
  assert.deepEqual(await resolveMounts(mount(join(root, 'data')), file), [
    { source: join(root, 'data'), target: '/data/ds' },
  ]);
  assert.deepEqual(
    await resolveMounts(mount(join(dir, 'link-in')), file),
    [{ source: join(root, 'data'), target: '/data/ds' }],
    'a symlink into a root mounts its target',
  );
  await refused(join(root, 'escape'), /under no allowed root \(it resolves to .*outside\)/);
  await refused(outside, /under no allowed root/);
  await refused(join(root, 'proj', '.ssh'), /blocked pattern "\.ssh"/);
  await refused(join(root, 'creds', 'aws-credentials'), /blocked pattern "credentials"/);
  await refused(join(root, 'file.txt'), /not a directory/);
  await refused(join(root, 'missing'), /does not exist/);
  await refused('relative/path', /must be absolute/);
  await mkdir(join(root, 'my-secret'));
  await refused(join(root, 'my-secret'), /blocked pattern "secret"/);

  await writeFile(file, '{"allowedRoots": "nope"}');
  await refused(join(root, 'data'), /allowedRoots/);
});

test('blockedPatternIn matches any path component containing a pattern', () => {
  const cases: { path: string; expected: string | undefined }[] = [
    { path: '/home/u/.ssh', expected: '.ssh' },
    { path: '/srv/app/.env.local', expected: '.env' },
    { path: '/srv/keys/id_rsa.pub', expected: 'id_rsa' },
    { path: '/srv/datasets/images', expected: undefined },
  ];
  for (const c of cases)
    assert.equal(blockedPatternIn(c.path, ['.ssh', '.env', 'id_rsa']), c.expected, c.path);
});

test('agent spec: a container path is relative, without "..", "." or ":"', () => {
  const spec = (containerPath: string) =>
    agentSpecSchema.safeParse({
      name: 'a',
      provider: 'command',
      mounts: [{ hostPath: '/srv/d', containerPath }],
    });
  for (const ok of ['ds', 'a/b', 'v1.2', 'my_data-set']) assert.ok(spec(ok).success, ok);
  for (const bad of ['/abs', '..', '../x', 'a/../b', 'a/..', '.', './a', 'a:b', 'a//b', 'a/', '']) {
    assert.ok(!spec(bad).success, bad);
  }
  assert.deepEqual(agentSpecSchema.parse({ name: 'a', provider: 'command' }).mounts, []);
});
