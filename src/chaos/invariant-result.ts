/**
 * One checked invariant: a name, pass/fail, a one-line summary, and the offending items.
 *
 * Invariants: `passed` is exactly "no details"; details are capped at MAX_DETAILS lines
 * (plus one line saying how many more), so a report stays readable when everything fails;
 * a failed one's summary starts by saying so, as its checked claim alone reads like a pass.
 */
export interface InvariantResult {
  name: string;
  passed: boolean;
  /** One line: what was checked and what was found. */
  summary: string;
  details: string[];
}

const MAX_DETAILS = 20;

export function result(name: string, summary: string, details: string[]): InvariantResult {
  return {
    name,
    passed: details.length === 0,
    summary: details.length === 0 ? summary : `does not hold (${details.length} found): ${summary}`,
    details:
      details.length > MAX_DETAILS
        ? [...details.slice(0, MAX_DETAILS), `... ${details.length - MAX_DETAILS} more`]
        : details,
  };
}
