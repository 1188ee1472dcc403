#!/usr/bin/env node
// Runs every compiled test file (unit tests beside their source, integration tests in
// test/) on node:test, whose summary closes the output. Node 20's --test takes no globs,
// so the files are listed here. Arguments filter files by substring.
//
// Skipped tests are listed after the summary with the reason each gave (every skip names
// what it needs: a tier, a tool, root). With BERTH_REQUIRE_ALL_SUITES=1, which .ci/run
// sets, any skip fails the run: CI must run every suite, and a suite that silently skips
// for want of something would otherwise pass. A skip a test adds later is caught the same
// way: the list comes from node:test's own events (scripts/skip-reporter.js).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const REQUIRE_ALL = 'BERTH_REQUIRE_ALL_SUITES';
const SKIP_REPORTER = fileURLToPath(new URL('./skip-reporter.js', import.meta.url));

function testFiles(dir) {
  if (!existsSync(dir)) return [];
  let out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out = out.concat(testFiles(path));
    else if (name.endsWith('.test.js')) out.push(path);
  }
  return out;
}

const filters = process.argv.slice(2);
const files = ['dist/src', 'dist/test']
  .flatMap((d) => testFiles(d))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error(`run-tests: no test files match ${filters.join(' ')}`);
  process.exit(1);
}
const skipsDir = mkdtempSync(join(tmpdir(), 'berth-skips-'));
const skipsFile = join(skipsDir, 'skips.jsonl');
const result = spawnSync(
  process.execPath,
  [
    '--test',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${SKIP_REPORTER}`,
    `--test-reporter-destination=${skipsFile}`,
    '--test-concurrency=1',
    ...files,
  ],
  { stdio: 'inherit' },
);
const skips = existsSync(skipsFile)
  ? readFileSync(skipsFile, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line))
  : [];
rmSync(skipsDir, { recursive: true, force: true });
let status = result.status ?? 1;
if (skips.length > 0) {
  console.log(`\nrun-tests: ${skips.length} skipped:`);
  for (const s of skips) {
    const where = s.file ? relative(process.cwd(), s.file) : '?';
    console.log(`  ${where} › ${s.name}: ${s.reason ?? '(no reason given: say what it needs)'}`);
  }
  if (process.env[REQUIRE_ALL] === '1') {
    console.error(
      `run-tests: ${REQUIRE_ALL}=1: every suite must run, and ${skips.length} test(s) skipped (above, each with what it needs).\n` +
        'Fix: install what they need (README.md, "Optional suites"), or run without ' +
        `${REQUIRE_ALL} outside CI.`,
    );
    if (status === 0) status = 1;
  }
}
process.exit(status);
