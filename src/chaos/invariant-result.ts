/**
 * One checked invariant: a name, pass/fail, a one-line summary, the offending items, and
 * the items it excused.
 *
 * Invariants: `passed` is exactly "no details"; details and excused lines are each capped
 * at MAX_DETAILS lines (plus one line saying how many more), so a report stays readable
 * when everything fails; a failed one's summary starts by saying so, as its checked claim
 * alone reads like a pass; an excused item is one the invariant's own rule lets pass, and
 * its line says why, so that no finding is dropped without a word.
 */
export interface InvariantResult {
  name: string;
  passed: boolean;
  /** One line: what was checked and what was found. */
  summary: string;
  details: string[];
  /** What would have broken it but is excused, and why (empty for most invariants). */
  excused: string[];
}

const MAX_DETAILS = 20;

export function result(
  name: string,
  summary: string,
  details: string[],
  excused: string[] = [],
): InvariantResult {
  const said = excused.length === 0 ? summary : `${summary} (${excused.length} excused)`;
  return {
    name,
    passed: details.length === 0,
    summary: details.length === 0 ? said : `does not hold (${details.length} found): ${said}`,
    details: capped(details),
    excused: capped(excused),
  };
}

function capped(lines: string[]): string[] {
  return lines.length > MAX_DETAILS
    ? [...lines.slice(0, MAX_DETAILS), `... ${lines.length - MAX_DETAILS} more`]
    : lines;
}

/**
 * The invariants checkInvariants reports for every run, in its order: the set does not
 * depend on the run's store or faults (those are the verdict's). The verdict fails a run
 * whose checker reported any other set.
 */
export const CHAOS_INVARIANTS = [
  'exactly-one-reply',
  'replies-in-order',
  'reply-attribution',
  'outcomes-agree',
  'acknowledged-kept',
  'committed-workspace',
  'chain-objects-present',
  'workspace-from-chain',
  'never-behind',
  'no-partial-reads',
  'no-stray-process',
  'no-failed-steps',
  'turns-ended',
  'clean-shutdown',
  'no-orphan-containers',
  'no-orphan-mounts',
  'no-orphan-slots',
  'no-orphan-run-dirs',
  'no-orphan-layers',
  'no-orphan-processes',
] as const;
