/**
 * scripts/run-tests.js on fixture test files in a throw-away tree: a skipped (or todo) test is
 * listed with its reason; with BERTH_REQUIRE_ALL_SUITES=1 (what .ci/run sets) a skip fails
 * the run and the output names what the test needed, while a run without skips still
 * passes; a failing test fails the run either way.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const REPO = join(import.meta.dirname, '..', '..');
const RUN_TESTS = join(REPO, 'scripts', 'run-tests.js');
const roots: string[] = [];
after(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

const SKIPPING = `import { test } from 'node:test';
test('runs on the gVisor tier', { skip: 'needs the frobnicator tier (scripts/ensure-frobnicator.sh)' }, () => {});
test('skips itself', (t) => t.skip('needs root: network namespaces'));
test('not written yet', { todo: 'the frobnicator check' }, () => { throw new Error('unchecked'); });
test('runs', () => {});
`;
const PASSING = `import { test } from 'node:test';
test('runs', () => {});
`;
const FAILING = `import { test } from 'node:test';
test('fails', () => { throw new Error('no'); });
`;

/** Runs run-tests.js in a tree holding `files` under dist/test, with BERTH_REQUIRE_ALL_SUITES as given. */
function runTests(files: Record<string, string>, requireAll: boolean) {
  const root = mkdtempSync(join(tmpdir(), 'berth-run-tests-'));
  roots.push(root);
  mkdirSync(join(root, 'dist', 'test'), { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(root, 'dist', 'test', name), text);
  // The inner runner must not think it is one of this runner's children.
  const { NODE_TEST_CONTEXT: _, BERTH_REQUIRE_ALL_SUITES: __, ...env } = process.env;
  const run = spawnSync(process.execPath, [RUN_TESTS], {
    cwd: root,
    encoding: 'utf8',
    env: { ...env, ...(requireAll ? { BERTH_REQUIRE_ALL_SUITES: '1' } : {}) },
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

test('a skip is listed with its reason and fails the run only under BERTH_REQUIRE_ALL_SUITES=1', () => {
  const relaxed = runTests({ 'skipping.test.js': SKIPPING }, false);
  assert.equal(relaxed.status, 0, relaxed.output);
  assert.match(relaxed.output, /run-tests: 3 skipped:/);
  assert.match(
    relaxed.output,
    /dist\/test\/skipping\.test\.js › runs on the gVisor tier: needs the frobnicator tier \(scripts\/ensure-frobnicator\.sh\)/,
  );
  assert.match(relaxed.output, /› skips itself: needs root: network namespaces/);
  assert.match(
    relaxed.output,
    /› not written yet: todo: the frobnicator check/,
    'a todo test counts as a skip',
  );

  const strict = runTests({ 'skipping.test.js': SKIPPING }, true);
  assert.equal(strict.status, 1, strict.output);
  assert.match(strict.output, /needs the frobnicator tier/);
  assert.match(strict.output, /BERTH_REQUIRE_ALL_SUITES=1: every suite must run, and 3 test\(s\) skipped/);
});

test('under BERTH_REQUIRE_ALL_SUITES=1 a run without skips passes and a failing test still fails', () => {
  const clean = runTests({ 'passing.test.js': PASSING }, true);
  assert.equal(clean.status, 0, clean.output);
  assert.doesNotMatch(clean.output, /skipped:/);
  assert.equal(runTests({ 'failing.test.js': FAILING }, true).status, 1);
  assert.equal(runTests({ 'failing.test.js': FAILING }, false).status, 1);
});

test('.ci/run exports BERTH_REQUIRE_ALL_SUITES=1 and then runs exactly the README’s test command', () => {
  const ci = readFileSync(join(REPO, '.ci', 'run'), 'utf8');
  const commands = ci.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
  assert.deepEqual(commands.slice(-2), ['export BERTH_REQUIRE_ALL_SUITES=1', 'make test']);
  assert.match(readFileSync(join(REPO, 'README.md'), 'utf8'), /^make test {4}# /m);
});
