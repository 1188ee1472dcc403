// The base image against the real Docker engine: built (or found), then run with the sandbox's
// hardening (no network, read-only root). The first run on a machine builds it with debootstrap
// (about a minute); the rootfs cache in CACHE_DIR makes later rebuilds take seconds.
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import Docker from 'dockerode';
import {
  type BaseImageRecipe,
  baseImageTag,
  createDebootstrapProgressParser,
  ensureBaseImage,
  parseAptMirror,
} from '../src/runtime/docker/base-image.js';

// Outside the repository and kept between runs, so a rerun does not debootstrap again.
const CACHE_DIR = path.join(os.tmpdir(), 'berth-image-cache');

const RECIPE: BaseImageRecipe = {
  recipeVersion: 1,
  suite: 'bookworm',
  variant: 'minbase',
  packages: ['procps'],
  nodePath: '/usr/bin/node',
  nodeSha256: 'a'.repeat(64),
};

test('baseImageTag is berth-base:<12 hex> and changes with every input but the node path', async (t) => {
  const tag = baseImageTag(RECIPE);
  assert.match(tag, /^berth-base:[0-9a-f]{12}$/);
  const changed: Array<[string, BaseImageRecipe]> = [
    ['recipe version', { ...RECIPE, recipeVersion: 2 }],
    ['suite', { ...RECIPE, suite: 'trixie' }],
    ['packages', { ...RECIPE, packages: ['procps', 'curl'] }],
    ['node binary', { ...RECIPE, nodeSha256: 'b'.repeat(64) }],
  ];
  for (const [name, recipe] of changed) {
    await t.test(name, () => assert.notEqual(baseImageTag(recipe), tag));
  }
  await t.test('same binary at another path', () => {
    assert.equal(baseImageTag({ ...RECIPE, nodePath: '/opt/node/bin/node' }), tag);
  });
  await t.test('package order', () => {
    const two = { ...RECIPE, packages: ['procps', 'curl'] };
    assert.equal(baseImageTag({ ...two, packages: ['curl', 'procps'] }), baseImageTag(two));
  });
});

test('debootstrap lines become counted phases', () => {
  const parse = createDebootstrapProgressParser();
  const lines = [
    'I: Retrieving InRelease ',
    'I: Resolving dependencies of required packages...',
    'I: Retrieving adduser 3.134',
    'I: Validating adduser 3.134',
    'I: Retrieving gcc-12-base 12.2.0-14+deb12u1',
    'I: Extracting adduser...',
    'I: Unpacking required packages...',
    'I: Unpacking adduser...',
    'I: Unpacking gcc-12-base:amd64...',
    'I: Configuring required packages...',
    'I: Configuring gcc-12-base:amd64...',
    'I: Configuring gcc-12-base:amd64...',
    'I: Base system installed successfully.',
  ];
  assert.deepEqual(
    lines.map((line) => parse(line)),
    [
      { phase: 'index' },
      { phase: 'resolve' },
      { phase: 'download', done: 1 },
      undefined,
      { phase: 'download', done: 2 },
      { phase: 'extract', done: 1 },
      undefined,
      { phase: 'unpack', done: 1, total: 2 },
      { phase: 'unpack', done: 2, total: 2 },
      undefined,
      { phase: 'configure', done: 1, total: 2 },
      { phase: 'configure', done: 1, total: 2 },
      undefined,
    ],
  );
});

test('the Debian mirror is read from one-line and deb822 apt sources', () => {
  const list = {
    deb822: false,
    text: [
      '# deb http://commented.example/debian bookworm main',
      'deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main',
      'deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main contrib',
    ].join('\n'),
  };
  const sources = {
    deb822: true,
    text: [
      'Types: deb',
      'URIs: http://disabled.example/debian',
      'Suites: bookworm',
      'Components: main',
      'Enabled: no',
      '',
      'Types: deb deb-src',
      '# a comment inside the stanza',
      'URIs: http://deb.example/debian',
      'Suites: bookworm bookworm-updates',
      'Components: main',
    ].join('\n'),
  };
  assert.equal(parseAptMirror([list, sources], 'bookworm'), 'http://mirror.example/debian');
  assert.equal(parseAptMirror([sources, list], 'bookworm'), 'http://deb.example/debian');
  assert.equal(parseAptMirror([sources], 'bookworm-updates'), 'http://deb.example/debian');
  assert.equal(parseAptMirror([list], 'trixie'), undefined);
});

test('the base image runs node, ps and uid 1000 with no network and a read-only root', {
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
      'node -e "console.log(process.version)" && id -u && stat -c %u:%g /workspace && ps -o comm= -p 1',
    ],
    HostConfig: { NetworkMode: 'none', ReadonlyRootfs: true },
  });
  try {
    await container.start();
    const exit = (await container.wait()) as { StatusCode: number };
    const logs = demuxLogs(await container.logs({ stdout: true, stderr: true, follow: false }));
    assert.equal(exit.StatusCode, 0, `container failed; stderr: ${logs.stderr}`);
    assert.deepEqual(logs.stdout.trim().split('\n'), [process.version, '1000', '1000:1000', 'sh']);
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
