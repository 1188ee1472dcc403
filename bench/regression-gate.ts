/**
 * The regression gate: each benchmark's ratio to the baseline it measured in the same run
 * (berth's p50 over the engine's own p50), against the ratio a full run on a quiet machine
 * gave (docs/performance.md). Ratios, not times, because a loaded or slower machine slows
 * the baseline too. A ratio past its reference by more than the tolerance is a warning,
 * never a failure: timings are noisy, and `--quick` takes few samples.
 */

type Result = Record<string, unknown>;

interface GatedRatio {
  bench: string;
  name: string;
  /** berth / baseline, both p50s of `result`; null when the run measured neither. */
  of(result: Result): number | null;
  reference: number;
}

/** A ratio past `reference × (1 + TOLERANCE)` is a warning. */
export const TOLERANCE = 0.5;

const p50 = (result: Result, key: string): number | null => {
  const value = (result[key] as { p50?: unknown } | undefined)?.p50;
  return typeof value === 'number' && value > 0 ? value : null;
};

const ratioOf =
  (berthKey: string, baselineKey: string) =>
  (result: Result): number | null => {
    const berth = p50(result, berthKey);
    const baseline = p50(result, baselineKey);
    return berth === null || baseline === null ? null : berth / baseline;
  };

/** The references: the full run of docs/performance.md; kill → reply and the burst from the runs that added them. */
export const GATED_RATIOS: readonly GatedRatio[] = [
  {
    bench: 'cold-start',
    name: 'cold reply / docker run',
    of: ratioOf('coldMessageToReplyMs', 'baselineDockerRunNodeMs'),
    reference: 1.04,
  },
  {
    bench: 'warm-start',
    name: 'warm start (runner holds the turn) / docker exec',
    of: ratioOf('newSessionToRunnerHoldsTurnMs', 'baselineDockerExecTrueMs'),
    reference: 0.31,
  },
  {
    bench: 'warm-path',
    name: 'bound reply / docker exec',
    of: ratioOf('warmMessageToReplyMs', 'baselineDockerExecTrueMs'),
    reference: 0.43,
  },
  {
    bench: 'detection',
    name: 'kill → turn aborted / the kill call',
    of: ratioOf('killStartToTurnAbortedMs', 'baselineDockerKillCallMs'),
    reference: 0.81,
  },
  {
    bench: 'detection',
    name: 'kill → reply / the kill call',
    of: ratioOf('killStartToReplyMs', 'baselineDockerKillCallMs'),
    reference: 1.8,
  },
  {
    bench: 'burst',
    name: 'a burst of new sessions all started / the pool refilling as many',
    of: (result) => {
      const ratio = result.ratioAllStartedToRefill;
      return typeof ratio === 'number' && ratio > 0 ? ratio : null;
    },
    reference: 1.4,
  },
];

export interface GateVerdict {
  bench: 'regression-gate';
  tolerance: number;
  ratios: { bench: string; name: string; ratio: number; reference: number; regressed: boolean }[];
  warnings: string[];
}

/** Judges the results of one run: every gated ratio it measured, and a warning for each past its reference. */
export function judgeRatios(results: Result[]): GateVerdict {
  const ratios: GateVerdict['ratios'] = [];
  for (const gated of GATED_RATIOS) {
    const result = results.find((r) => r.bench === gated.bench);
    const ratio = result ? gated.of(result) : null;
    if (ratio === null) continue;
    const rounded = Math.round(ratio * 100) / 100;
    ratios.push({
      bench: gated.bench,
      name: gated.name,
      ratio: rounded,
      reference: gated.reference,
      regressed: ratio > gated.reference * (1 + TOLERANCE),
    });
  }
  const warnings = ratios
    .filter((r) => r.regressed)
    .map(
      (r) =>
        `bench ${r.bench}: ${r.name} is ${r.ratio}, past its reference ${r.reference} by more than ${TOLERANCE * 100} %; ` +
        'run it again on a quiet machine (npm run bench -- --only=NAME) before trusting it',
    );
  return { bench: 'regression-gate', tolerance: TOLERANCE, ratios, warnings };
}
