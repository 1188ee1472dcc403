// The base image against the real Docker engine: built (or found), then run with the sandbox's
// hardening (no network, read-only root). The first run on a machine builds it with debootstrap
// (about a minute); the rootfs cache in CACHE_DIR makes later rebuilds take seconds.
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import Docker from 'dockerode';
import { ensureBaseImage } from '../src/image/index.js';

// Outside the repository and kept between runs, so a rerun does not debootstrap again.
const CACHE_DIR = path.join(os.tmpdir(), 'berth-image-cache');

test('the base image runs node, ps and uid 1000 with no network and a read-only root, and holds no setuid or setgid file', {
  timeout: 10 * 60_000,
}, async (t) => {
  const docker = new Docker();
  const first = await ensureBaseImage(docker, { cacheDir: CACHE_DIR });
  assert.match(first.tag, /^berth-base:[0-9a-f]{12}$/);
  t.diagnostic(`${first.tag} ${first.built ? 'built' : 'already present'}`);

  // The second call must find the image and skip the ~100 MB node hash thanks to the hash cache.
  const startedAt = performance.now();
  const second = await ensureBaseImage(docker, { cacheDir: CACHE_DIR });
  t.diagnostic(`second ensureBaseImage took ${Math.round(performance.now() - startedAt)} ms`);
  assert.deepEqual(second, { tag: first.tag, built: false });

  const info = await docker.getImage(first.tag).inspect();
  assert.equal(info.Config.User, '1000:1000');
  assert.equal(info.Config.WorkingDir, '/workspace');
  assert.ok(info.Config.Env.includes('PATH=/usr/local/bin:/usr/bin:/bin'));

  const container = await docker.createContainer({
    Image: first.tag,
    Cmd: [
      'sh',
      '-c',
      'node -e "console.log(process.version)" && id -u && stat -c %u:%g /workspace && ps -o comm= -p 1 && ' +
        'echo "set-id files: $(find / -xdev -perm /6000 -type f 2>/dev/null | wc -l)"',
    ],
    HostConfig: { NetworkMode: 'none', ReadonlyRootfs: true },
  });
  try {
    await container.start();
    const exit = (await container.wait()) as { StatusCode: number };
    const logs = demuxLogs(await container.logs({ stdout: true, stderr: true, follow: false }));
    assert.equal(exit.StatusCode, 0, `container failed; stderr: ${logs.stderr}`);
    assert.deepEqual(logs.stdout.trim().split('\n'), [
      process.version,
      '1000',
      '1000:1000',
      'sh',
      'set-id files: 0',
    ]);
  } finally {
    await container.remove({ force: true });
  }
  await assert.rejects(container.inspect(), (err: { statusCode?: number }) => err.statusCode === 404);
});

/** Splits the Engine API's multiplexed log stream (8-byte frame headers) into stdout and stderr. */
function demuxLogs(buf: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  for (let at = 0; at + 8 <= buf.length; ) {
    const size = buf.readUInt32BE(at + 4);
    (buf[at] === 2 ? err : out).push(buf.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return { stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
}
