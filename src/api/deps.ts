/** What the API needs from the host; passed to buildApp, never read from globals. */

import type { BlobStore } from '../blobs/index.js';
import type { WebhookDispatcher } from '../channels/index.js';
import type { AgentSpec, Clock, ResolvedConfig } from '../core/index.js';
import type { ApiStore } from '../store/index.js';
import type { WorkspaceHistory } from '../workspace/index.js';
import type { ChangeFeed, FeedOptions } from './change-feed.js';
import type { BerthMetrics } from './metrics.js';
import type { RouteTable } from './route-table.js';

export interface ApiDeps {
  config: ResolvedConfig;
  store: ApiStore;
  clock: Clock;
  /** The host's dispatcher, woken when a delivery is sent again; absent = deliveries wait for its next poll. */
  webhooks?: WebhookDispatcher;
  /** The host's metrics (they time its store calls); absent = the app makes its own. */
  metrics?: BerthMetrics;
  /** Pre-booted sandboxes waiting for a session, for berth_warm_pool_size. @default () => 0 */
  warmPoolSize?: () => number;
  /**
   * The image an agent runs, given the spec and the stored agent it replaces: the image it
   * names, or the agent image of its harness and packages (undefined = the host's image);
   * HARNESS_NOT_IN_IMAGE or AGENT_IMAGE_MISSING when that image does not hold them.
   * Absent = not checked (the image the spec names is kept).
   */
  agentImage?: (spec: AgentSpec, stored?: AgentSpec) => Promise<string | undefined>;
  /**
   * Limits of the SSE streams: `bufferBytes`, the unsent bytes past which a live stream is
   * cut off with an `overflow` event (@default 1 MiB); `feed`, the change feed's timings
   * (change-feed.ts). Absent = the defaults; tests shorten them.
   */
  streams?: { bufferBytes?: number; feed?: Partial<FeedOptions> };
  /** Reads sessions' workspace history from the blob store (diffs, files at a version); absent = those routes answer INTERNAL. */
  history?: WorkspaceHistory;
  /** The names in the host's secret store (a channel's bot token must be one); absent = not checked. */
  secretNames?: () => Promise<string[]>;
  /** Where files sent with a pushed chat message are stored before its commit (Slack's Events API); absent = they are left out. */
  blobs?: BlobStore;
  /** The host's secret store, read for a channel's signing secret (Slack's signed events); absent = pushed events are refused. */
  secrets?: { get(name: string): Promise<string | undefined> };
}

/** What each route plugin gets: the deps, the table its routes are declared in, and the process's change feed. */
export interface PluginDeps extends ApiDeps {
  routes: RouteTable;
  feed: ChangeFeed;
}
