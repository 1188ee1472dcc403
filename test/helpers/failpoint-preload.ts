/**
 * The test seam of src/core/failpoints.ts: loaded into a berth process a test spawns, with
 * `NODE_OPTIONS=--import=<this file>` and BERTH_TEST_FAILPOINTS=<name>[@<n>][,…], it arms
 * each named point to SIGKILL the process there (at its n-th pass, the first by default),
 * the way a machine dies. Production berth never loads it, so its failpoints stay inert.
 */
import { armFailpoint, FAILPOINTS, type FailpointName } from '../../src/core/index.js';

const KNOWN: readonly string[] = FAILPOINTS;

for (const armed of (process.env.BERTH_TEST_FAILPOINTS ?? '').split(',').filter(Boolean)) {
  const [name = '', nth = '1'] = armed.split('@');
  if (!KNOWN.includes(name))
    throw new Error(`BERTH_TEST_FAILPOINTS names ${name}; the failpoints are ${KNOWN.join(', ')}`);
  let passes = 0;
  armFailpoint(name as FailpointName, () => {
    if (++passes >= Number(nth)) process.kill(process.pid, 'SIGKILL');
  });
}

/** The environment that arms `names` (`name` or `name@n`) in a berth child process. */
export function failpointEnv(...names: (FailpointName | `${FailpointName}@${number}`)[]): NodeJS.ProcessEnv {
  return {
    NODE_OPTIONS: `--import=${import.meta.filename}`,
    BERTH_TEST_FAILPOINTS: names.join(','),
  };
}
