/**
 * The test seam of src/core/failpoints.ts: loaded into a berth process a test spawns, with
 * `NODE_OPTIONS=--import=<this file>` and BERTH_TEST_FAILPOINTS=<name>[,<name>…], it arms
 * each named point to SIGKILL the process there, the way a machine dies. Production berth
 * never loads it, so its failpoints stay inert.
 */
import { armFailpoint, FAILPOINTS, type FailpointName } from '../../src/core/index.js';

for (const name of (process.env.BERTH_TEST_FAILPOINTS ?? '').split(',').filter(Boolean)) {
  if (!(FAILPOINTS as readonly string[]).includes(name))
    throw new Error(`BERTH_TEST_FAILPOINTS names ${name}; the failpoints are ${FAILPOINTS.join(', ')}`);
  armFailpoint(name as FailpointName, () => process.kill(process.pid, 'SIGKILL'));
}

/** The environment that arms `names` in a berth child process. */
export function failpointEnv(...names: FailpointName[]): NodeJS.ProcessEnv {
  return {
    NODE_OPTIONS: `--import=${import.meta.filename}`,
    BERTH_TEST_FAILPOINTS: names.join(','),
  };
}
