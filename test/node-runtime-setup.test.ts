/**
 * The set-up's choice of the Node.js that runs berth (scripts/lib/node-runtime.sh,
 * scripts/ensure-node.sh, scripts/with-node.sh), on throw-away layouts: a PATH whose `node`
 * says it is 20 or 24, berth's prefix in an empty dir (BERTH_NODE_HOME) and an empty npm
 * cache, so the install really fetches from the npm registry as on a fresh machine.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { scriptRunner } from './helpers/script-runner.js';

const REPO = join(import.meta.dirname, '..', '..');
const runtimeLib = readFileSync(join(REPO, 'scripts', 'lib', 'node-runtime.sh'), 'utf8');
const PINNED = /^BERTH_NODE_VERSION=(\S+)$/m.exec(runtimeLib)?.[1] ?? '';
const MAJOR = Number(/^BERTH_NODE_MAJOR=(\d+)$/m.exec(runtimeLib)?.[1]);
const roots: string[] = [];
after(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

/** A machine whose own `node` reports `version`; it runs JavaScript (npm) on this test's node. */
function machine(ownNode: 'v20.20.2' | 'this test runner') {
  const root = mkdtempSync(join(tmpdir(), 'berth-node-setup-'));
  roots.push(root);
  const bin = join(root, 'machine-bin');
  mkdirSync(bin);
  if (ownNode === 'this test runner') symlinkSync(process.execPath, join(bin, 'node'));
  else {
    writeFileSync(
      join(bin, 'node'),
      `#!/bin/sh\n[ "$1" = --version ] && { echo ${ownNode}; exit 0; }\nexec '${process.execPath}' "$@"\n`,
    );
    chmodSync(join(bin, 'node'), 0o755);
  }
  const home = join(root, 'berth-home');
  // The rest of the environment stays: npm's own settings (~/.npmrc: its CA, registry, proxy) are the machine's.
  const env = {
    ...process.env,
    PATH: `${bin}:/usr/local/bin:/usr/bin:/bin`,
    BERTH_NODE_HOME: home,
    BERTH_SETUP_LOGS: join(root, 'logs'),
    npm_config_cache: join(root, 'npm-cache'),
  };
  const run = scriptRunner(env, REPO);
  return { run, bin, home, prefix: join(home, `node-v${PINNED}-linux-x64`) };
}

const ENSURE = join(REPO, 'scripts', 'ensure-node.sh');
const WITH_NODE = join(REPO, 'scripts', 'with-node.sh');
/** A registry that refuses every connection, and no retries: the npm package unreachable. */
const UNREACHABLE = { npm_config_registry: 'http://127.0.0.1:9/', npm_config_fetch_retries: '0' };

test('the pinned major is the floor package.json declares', () => {
  const engines = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).engines.node;
  assert.equal(engines, `>=${MAJOR}`);
  assert.equal(Number(PINNED.split('.')[0]), MAJOR);
});

test('a machine with Node 20: berth installs its pinned build from the npm registry and runs on it', {
  skip: process.arch !== 'x64' && 'the layout names the x64 build',
}, () => {
  const m = machine('v20.20.2');
  assert.match(
    m.run([ENSURE, '--describe']).out,
    new RegExp(`berth's v${PINNED} in ${m.prefix}: this machine's v20.20.2 is older than ${MAJOR}`),
  );
  // Before the install, the commands refuse with the fix rather than run on Node 20.
  const before = m.run([WITH_NODE, 'node', '--version']);
  assert.equal(before.code, 1, before.out);
  assert.match(before.out, /Fix: run 'make setup-demo'/);

  const installed = m.run([ENSURE]);
  assert.equal(installed.code, 0, installed.out);
  assert.match(installed.out, /integrity sha512-\S+ matches the pinned one/);
  assert.equal(
    spawnSync(join(m.prefix, 'bin', 'node'), ['--version'], { encoding: 'utf8' }).stdout.trim(),
    `v${PINNED}`,
  );
  assert.ok(
    existsSync(join(m.prefix, 'include', 'node', 'node_api.h')),
    'the headers native addons build against',
  );
  assert.deepEqual(readdirSync(m.home), [`node-v${PINNED}-linux-x64`], 'no partial dir left beside it');

  const ran = m.run([WITH_NODE, 'node', '-p', 'process.version']);
  assert.equal(ran.out.trim(), `v${PINNED}`);
  const berth = m.run([join(REPO, 'bin', 'berth'), '--version']);
  assert.equal(berth.code, 0, berth.out);
  // Installed: the next run fetches nothing (the registry is unreachable now).
  const again = m.run([ENSURE], UNREACHABLE);
  assert.equal(again.code, 0, again.out);
  assert.match(again.out, new RegExp(`Node.js v${PINNED} already installed`));
});

test('a machine with Node 24: its own node runs berth and nothing is installed', () => {
  const m = machine('this test runner');
  assert.match(
    m.run([ENSURE, '--describe']).out,
    new RegExp(`this machine's ${process.version} \\(${m.bin}/node\\)`),
  );
  const r = m.run([ENSURE], UNREACHABLE);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /nothing to install/);
  assert.equal(existsSync(m.home), false);
  assert.equal(m.run([WITH_NODE, 'sh', '-c', 'command -v node']).out.trim(), join(m.bin, 'node'));
});

test('the npm package unreachable: the set-up stops at its first step, named, with the fix', () => {
  const m = machine('v20.20.2');
  const r = m.run(['bash', join(REPO, 'scripts', 'setup.sh'), 'demo'], UNREACHABLE);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /^setup: step "Node.js runtime \(berth's v\S+ in .*\)" failed after/m);
  assert.match(r.out, /^Fix: check that this machine reaches the npm registry \(npm ping\)/m);
  assert.doesNotMatch(r.out, /==> dependencies/, 'nothing after the failed step runs');
  assert.equal(existsSync(m.prefix), false);
  assert.deepEqual(existsSync(m.home) ? readdirSync(m.home) : [], [], 'no partial dir left');
});
