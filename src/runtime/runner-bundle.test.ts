import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { RUNNER_ENTRY, stageRunner } from './runner-bundle.js';

test('the runner is staged once per version of its code, even by workers staging at once', async (t) => {
  const base = await mkdtemp(join(tmpdir(), 'berth-runner-'));
  t.after(() => rm(base, { recursive: true, force: true }));
  const dirs = await Promise.all([stageRunner(base), stageRunner(base), stageRunner(base)]);
  assert.equal(new Set(dirs).size, 1);
  const dir = dirs[0];
  assert.deepEqual(await readdir(base), [dir.slice(base.length + 1)], 'no staging leftovers');
  assert.match(await readFile(join(dir, RUNNER_ENTRY), 'utf8'), /gateway/);
  assert.equal(await readFile(join(dir, 'package.json'), 'utf8'), '{"type":"module"}\n');
  // The core modules the runner imports, and theirs, and no other: each staged file's relative imports resolve.
  assert.deepEqual((await readdir(join(dir, 'core'))).sort(), [
    'backoff.js',
    'protocol.js',
    'retry.js',
    'sleep.js',
  ]);
  const main = await import(join(dir, 'core', 'retry.js'));
  assert.equal(typeof main.retryUntil, 'function', 'a staged core module loads with its own imports');
  // The model SDKs the runner imports, with their dependencies, without type declarations.
  for (const pkg of ['@anthropic-ai/sdk', 'openai'])
    assert.ok(JSON.parse(await readFile(join(dir, 'node_modules', pkg, 'package.json'), 'utf8')).version);
  await assert.rejects(readFile(join(dir, 'node_modules', 'openai', 'index.d.ts')), /ENOENT/);
  const sdk = await import(join(dir, 'node_modules', '@anthropic-ai', 'sdk', 'index.mjs'));
  assert.equal(typeof sdk.default, 'function', 'the staged SDK loads');
  assert.equal(await stageRunner(base), dir, 'a later worker reuses it');
});
