/**
 * `npm run bench -- --quick` as CI runs it: every benchmark completes against the real
 * engine and prints one JSON object with its same-run baseline, then the regression gate's
 * verdict on their ratios. Figures are not judged here (timings are noisy): the gate's
 * warnings are printed as diagnostics, never failures; docs/performance.md quotes a full run.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { GATED_RATIOS } from '../bench/regression-gate.js';
import { parseJsonLines } from '../src/core/index.js';

const run = promisify(execFile);

test('npm run bench -- --quick (the warm-pool and speed benchmarks): each prints its JSON with a baseline from the same run, and the gate judges their ratios', async (t) => {
  // The warm-pool and speed benchmarks (docs/performance.md) and the blob store's; modelProxy and isolation have their own runs (docs/model-agents.md, docs/isolation.md).
  const names = ['coldStart', 'warmStart', 'warmPath', 'detection', 'burst', 'liveSandboxes', 'blobs'];
  const { stdout } = await run(process.execPath, ['dist/bench/index.js', '--quick', ...names], {
    maxBuffer: 16 * 1024 * 1024,
    timeout: 15 * 60_000,
  });
  const results = parseJsonLines(stdout) as Record<string, unknown>[];
  const byName = new Map(results.map((r) => [r.bench, r]));
  for (const name of ['cold-start', 'warm-start', 'warm-path', 'detection', 'burst', 'live-sandboxes', 'blobs']) {
    const r = byName.get(name);
    assert.ok(r, `${name} printed a result: ${stdout}`);
    assert.ok(
      Object.keys(r).some((k) => k.startsWith('baseline')),
      `${name} carries its baseline: ${JSON.stringify(r)}`,
    );
  }
  const warm = byName.get('warm-start') as { newSessionToRunnerHoldsTurnMs: { n: number } };
  assert.ok(warm.newSessionToRunnerHoldsTurnMs.n > 0);
  const live = byName.get('live-sandboxes') as { sandboxes: number; sandboxOwnMemoryMiB: { n: number } };
  assert.ok(live.sandboxOwnMemoryMiB.n > 0, 'the live sandboxes were measured');
  const gate = byName.get('regression-gate') as { ratios: unknown[]; warnings: string[] } | undefined;
  assert.ok(gate, `the regression gate judged the run: ${stdout}`);
  assert.equal(gate.ratios.length, GATED_RATIOS.length, 'every gated ratio was measured');
  for (const warning of gate.warnings) t.diagnostic(`warning: ${warning}`);
  const blobs = byName.get('blobs') as {
    s3: { put10MiBMs: { n: number } };
    s3Service: { bringUpMs: number };
  };
  assert.ok(
    blobs.s3.put10MiBMs.n > 0 && blobs.s3Service.bringUpMs > 0,
    'both backends and the S3 service were measured',
  );
});
