/**
 * Named points in crash-sensitive sequences (commit and promotion) where a test can make
 * the process die the way a machine does. Inert in production: nothing arms a point
 * unless a test seam does (test/helpers/failpoint-preload.ts, loaded with `node --import`
 * into a berth process a test spawns), so `failpoint()` is a lookup in an empty map.
 */
export const FAILPOINTS = ['before-promote'] as const;
export type FailpointName = (typeof FAILPOINTS)[number];

const armed = new Map<FailpointName, () => void>();

/** Runs what a test armed at this point, if anything. */
export function failpoint(name: FailpointName): void {
  armed.get(name)?.();
}

/** For test seams only: what `failpoint(name)` does from now on. */
export function armFailpoint(name: FailpointName, action: () => void): void {
  armed.set(name, action);
}
