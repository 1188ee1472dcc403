/**
 * The bench regression gate judges ratios, not times: a run whose ratios sit at their
 * references passes quietly, one ratio past its tolerance gives one warning naming it, and
 * a benchmark that did not run is not judged.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GATED_RATIOS, judgeRatios, TOLERANCE } from '../bench/regression-gate.js';

const p50 = (ms: number) => ({ n: 5, p50: ms, p99: ms, min: ms, max: ms });

/** Results whose warm-path ratio is `warmPathRatio` and every other gated ratio at its reference. */
function results(warmPathRatio: number) {
  const ref = (name: string) => GATED_RATIOS.find((r) => r.name.startsWith(name))!.reference;
  return [
    { bench: 'cold-start', coldMessageToReplyMs: p50(100 * ref('cold')), baselineDockerRunNodeMs: p50(100) },
    {
      bench: 'warm-start',
      newSessionToRunnerHoldsTurnMs: p50(100 * ref('warm start')),
      baselineDockerExecTrueMs: p50(100),
    },
    {
      bench: 'warm-path',
      warmMessageToReplyMs: p50(100 * warmPathRatio),
      baselineDockerExecTrueMs: p50(100),
    },
    {
      bench: 'detection',
      baselineDockerKillCallMs: p50(100),
      killStartToTurnAbortedMs: p50(100 * ref('kill → turn')),
      killStartToReplyMs: p50(100 * ref('kill → reply')),
    },
    { bench: 'burst', ratioAllStartedToRefill: ref('a burst') },
  ];
}

test('the regression gate: quiet at the references, one warning for a ratio past its tolerance, nothing judged that did not run', () => {
  const reference = GATED_RATIOS.find((r) => r.bench === 'warm-path')!.reference;
  const atReference = judgeRatios(results(reference));
  assert.equal(atReference.ratios.length, GATED_RATIOS.length);
  assert.deepEqual(atReference.warnings, []);

  const regressed = judgeRatios(results(reference * (1 + TOLERANCE) * 1.1));
  assert.equal(regressed.warnings.length, 1);
  assert.match(
    regressed.warnings[0]!,
    /^bench warm-path: bound reply \/ docker exec is [\d.]+, past its reference/,
  );
  assert.deepEqual(
    regressed.ratios.filter((r) => r.regressed).map((r) => r.bench),
    ['warm-path'],
  );

  const withinTolerance = judgeRatios(results(reference * (1 + TOLERANCE) * 0.9));
  assert.deepEqual(withinTolerance.warnings, []);

  assert.deepEqual(
    judgeRatios([{ bench: 'blobs' }]).ratios,
    [],
    'a run without the gated benchmarks judges nothing',
  );
});
