/**
 * `npm run bench [-- --quick]`: every benchmark in turn; each prints one JSON object that
 * holds its own baseline, measured in the same run.
 */
import { coldStart } from './cold-start.js';
import { detection } from './detection.js';
import { warmPath } from './warm-path.js';

const quick = process.argv.includes('--quick');
for (const bench of [coldStart, warmPath, detection]) {
  process.stdout.write(`${JSON.stringify(await bench({ quick }))}\n`);
}
