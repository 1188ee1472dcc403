/**
 * `npm run bench [-- --quick]`: every benchmark in turn; each prints one JSON object that
 * holds its own baseline, measured in the same run. Last, the regression gate's verdict on
 * their ratios (regression-gate.ts), its warnings also on stderr.
 */
import { blobs } from './blobs.js';
import { burst } from './burst.js';
import { channelLatency } from './channel-latency.js';
import { channelRestarts } from './channel-restarts.js';
import { checkpoints } from './checkpoints.js';
import { coldStart } from './cold-start.js';
import { detection } from './detection.js';
import { diskBudget } from './disk-budget.js';
import { fairShare } from './fair-share.js';
import { fileBlobs } from './file-blobs.js';
import { harnesses } from './harnesses.js';
import { history } from './history.js';
import { isolation } from './isolation.js';
import { liveSandboxes } from './live-sandboxes.js';
import { modelProxy } from './model-proxy.js';
import { podStart } from './pod-start.js';
import { judgeRatios } from './regression-gate.js';
import { rewind } from './rewind.js';
import { sseStreams } from './sse-streams.js';
import { statusReads } from './status-reads.js';
import { storeFailover } from './store-failover.js';
import { storeScale } from './store-scale.js';
import { warmPath } from './warm-path.js';
import { warmStart } from './warm-start.js';
import { workspaces } from './workspaces.js';

const quick = process.argv.includes('--quick');
// Names to run: positional (`coldStart warmStart`) or --only=<name>; none = all.
const only = process.argv
  .slice(2)
  .map((a) => (a.startsWith('--only=') ? a.slice('--only='.length) : a))
  .filter((a) => !a.startsWith('--'));
const all = {
  coldStart,
  warmStart,
  warmPath,
  detection,
  burst,
  liveSandboxes,
  modelProxy,
  isolation,
  podStart,
  harnesses,
  blobs,
  storeFailover,
  workspaces,
  fileBlobs,
  history,
  rewind,
  checkpoints,
  storeScale,
  channelLatency,
  channelRestarts,
  sseStreams,
  fairShare,
  statusReads,
  diskBudget,
};
const results: Record<string, unknown>[] = [];
for (const [name, bench] of Object.entries(all)) {
  if (only.length > 0 && !only.includes(name)) continue;
  const result = await bench({ quick });
  results.push(result);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
const verdict = judgeRatios(results);
process.stdout.write(`${JSON.stringify(verdict)}\n`);
for (const warning of verdict.warnings) process.stderr.write(`warning: ${warning}\n`);
