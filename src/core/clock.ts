/** Time as a dependency, so deciders and tests take `now` instead of reading it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
