/** What every chaos test asserts of its run's report first. */
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { type ChaosReport, renderReport } from '../../src/chaos/index.js';

/** Prints the report, then asserts every invariant held and every request ended ok. Returns where the logs are, for messages. */
export function assertRunHeld(t: TestContext, report: ChaosReport): string {
  t.diagnostic(`\n${renderReport(report)}`);
  const where = `(store and logs kept in ${report.settings.dataDir})`;
  for (const inv of report.invariants)
    assert.ok(inv.passed, `${inv.name}: ${inv.summary}\n${inv.details.join('\n')}\n${where}`);
  assert.equal(report.requests.fail, 0, `no request failed ${where}`);
  assert.equal(report.requests.unknown, 0, `no request ended unknown ${where}`);
  return where;
}
