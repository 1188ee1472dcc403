#!/usr/bin/env node
// Runs every compiled test file (unit tests beside their source, integration tests in
// test/) on node:test, in two phases, each closed by node:test's own summary, then prints
// the total. Unit tests (dist/src) run several files at once: they own their temp dirs and
// ports, and mostly wait on timers, so this halves their wall time. Integration tests
// (dist/test) share Docker, the databases and the machine's cores, so one file at a time.
// Node 20's --test takes no globs, so the files are listed here. Arguments filter files by
// substring.
//
// Skipped tests are listed after the summary with the reason each gave (every skip names
// what it needs: a tier, a tool, root). With BERTH_REQUIRE_ALL_SUITES=1, which .ci/run
// sets, any skip fails the run: CI must run every suite, and a suite that silently skips
// for want of something would otherwise pass. A skip a test adds later is caught the same
// way: the list comes from node:test's own events (scripts/test-record-reporter.js).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const REQUIRE_ALL = 'BERTH_REQUIRE_ALL_SUITES';
const RECORD_REPORTER = fileURLToPath(new URL('./test-record-reporter.js', import.meta.url));
const PHASES = [
  { name: 'unit', dir: 'dist/src', concurrency: 2 * availableParallelism() },
  { name: 'integration', dir: 'dist/test', concurrency: 1 },
];

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
const matches = (f) => filters.length === 0 || filters.some((x) => f.includes(x));
const phases = PHASES.map((p) => ({ ...p, files: testFiles(p.dir).filter(matches).sort() })).filter(
  (p) => p.files.length > 0,
);
if (phases.length === 0) {
  console.error(`run-tests: no test files match ${filters.join(' ')}`);
  process.exit(1);
}
const recordsDir = mkdtempSync(join(tmpdir(), 'berth-tests-'));
let status = 0;
const totals = [];
for (const phase of phases) {
  const recordsFile = join(recordsDir, `${phase.name}.jsonl`);
  const result = spawnSync(
    process.execPath,
    [
      '--test',
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      `--test-reporter=${RECORD_REPORTER}`,
      `--test-reporter-destination=${recordsFile}`,
      `--test-concurrency=${phase.concurrency}`,
      ...phase.files,
    ],
    { stdio: 'inherit' },
  );
  if (result.status !== 0) status = result.status ?? 1;
  const records = existsSync(recordsFile)
    ? readFileSync(recordsFile, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line))
    : [];
  totals.push({ ...phase, records });
}
rmSync(recordsDir, { recursive: true, force: true });
const count = (records, outcome) => records.filter((r) => r.outcome === outcome).length;
const all = totals.flatMap((t) => t.records);
const skips = all.filter((r) => r.outcome === 'skip');
if (totals.length > 1) {
  const parts = totals.map(
    (t) => `${t.name} ${t.records.length} (${t.files.length} files, ${t.concurrency} at a time)`,
  );
  console.log(
    `\nrun-tests: ${all.length} tests: ${parts.join(' + ')}; ` +
      `pass ${count(all, 'pass')}, fail ${count(all, 'fail')}, skipped ${skips.length}`,
  );
}
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
