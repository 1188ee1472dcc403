/**
 * The test seam of src/core/failpoints.ts: loaded into a berth process a test spawns, with
 * `NODE_OPTIONS=--import=<this file>` and BERTH_TEST_FAILPOINTS=<name>[@<n>][,…], it arms
 * each named point to SIGKILL the process there (at its n-th pass, the first by default),
 * the way a machine dies. With BERTH_TEST_FAILPOINT_WATCH=<name>:<file>:<out>, each pass of
 * that point first reads `file` under the point's `merged` dir twice, WATCH_MS apart, the
 * process held in between, and appends both readings to `out` (one JSON line): whether
 * anything wrote it while the process stood at the point. Production berth never loads it,
 * so its failpoints stay inert.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { armFailpoint, FAILPOINTS, type FailpointContext, type FailpointName } from '../../src/core/index.js';

const WATCH_MS = 300;
const KNOWN: readonly string[] = FAILPOINTS;
const actions = new Map<FailpointName, ((context: FailpointContext) => void)[]>();

function known(name: string): FailpointName {
  if (!KNOWN.includes(name))
    throw new Error(`BERTH_TEST_FAILPOINTS names ${name}; the failpoints are ${KNOWN.join(', ')}`);
  return name as FailpointName;
}

function arm(name: FailpointName, action: (context: FailpointContext) => void): void {
  actions.set(name, [...(actions.get(name) ?? []), action]);
}

const watch = process.env.BERTH_TEST_FAILPOINT_WATCH;
if (watch) {
  const [name = '', file = '', out = ''] = watch.split(':');
  arm(known(name), (context) => {
    const read = () => readFileSync(join(context.merged ?? '', file), 'utf8').trim();
    const before = read();
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, WATCH_MS);
    appendFileSync(out, `${JSON.stringify({ before, after: read() })}\n`);
  });
}

for (const armed of (process.env.BERTH_TEST_FAILPOINTS ?? '').split(',').filter(Boolean)) {
  const [name = '', nth = '1'] = armed.split('@');
  let passes = 0;
  arm(known(name), () => {
    if (++passes >= Number(nth)) process.kill(process.pid, 'SIGKILL');
  });
}

for (const [name, run] of actions)
  armFailpoint(name, (context) => {
    for (const action of run) action(context);
  });

/** The environment that arms `names` (`name` or `name@n`) in a berth child process. */
export function failpointEnv(...names: (FailpointName | `${FailpointName}@${number}`)[]): NodeJS.ProcessEnv {
  return {
    NODE_OPTIONS: `--import=${import.meta.filename}`,
    BERTH_TEST_FAILPOINTS: names.join(','),
  };
}

/** The environment that watches `file` (under the point's `merged` dir) at each pass of `name`, into `out`. */
export function failpointWatchEnv(name: FailpointName, file: string, out: string): NodeJS.ProcessEnv {
  return {
    NODE_OPTIONS: `--import=${import.meta.filename}`,
    BERTH_TEST_FAILPOINT_WATCH: `${name}:${file}:${out}`,
  };
}
