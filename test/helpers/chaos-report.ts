/** What every chaos test asserts of its run's report first. */
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { CHAOS_INVARIANTS, type ChaosReport, renderReport } from '../../src/chaos/index.js';

/** The invariants the checker must report for every chaos run, in its order (the verdict checks the same). */
export { CHAOS_INVARIANTS };

/**
 * Prints the report, then asserts the checker reported exactly the expected invariants and
 * each held, every request ended ok, and the verdict passed (every fault kind asked for
 * found a running turn; no abort without a fault to explain it). Returns where the logs
 * are, for messages.
 */
export function assertRunHeld(t: TestContext, report: ChaosReport): string {
  t.diagnostic(`\n${renderReport(report)}`);
  const where = `(store and logs kept in ${report.settings.dataDir})`;
  assert.deepEqual(
    report.invariants.map((i) => i.name),
    [...CHAOS_INVARIANTS],
    `the checker reported these invariants ${where}`,
  );
  for (const inv of report.invariants)
    assert.ok(inv.passed, `${inv.name}: ${inv.summary}\n${inv.details.join('\n')}\n${where}`);
  assert.equal(report.requests.fail, 0, `no request failed ${where}`);
  assert.equal(report.requests.unknown, 0, `no request ended unknown ${where}`);
  assert.deepEqual(report.failures, [], `the run's verdict ${where}`);
  assert.ok(report.passed, where);
  return where;
}
