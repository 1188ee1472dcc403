#!/usr/bin/env node
// Runs every compiled test file (unit tests beside their source, integration tests in
// test/) on node:test, whose summary closes the output. Node 20's --test takes no globs,
// so the files are listed here. Arguments filter files by substring.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function testFiles(dir) {
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
const result = spawnSync(
  process.execPath,
  ['--test', '--test-reporter=spec', '--test-concurrency=1', ...files],
  {
    stdio: 'inherit',
  },
);
process.exit(result.status ?? 1);
