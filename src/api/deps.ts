/** What the API needs from the host; passed to buildApp, never read from globals. */
import type { Clock, HarnessName, ResolvedConfig } from '../core/index.js';
import type { ApiStore } from '../store/index.js';
import type { BerthMetrics } from './metrics.js';
import type { RouteTable } from './route-table.js';
import type { WebhookDispatcher } from './webhook-dispatcher.js';

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
   * The image a harness agent runs (its own, or the agent image built for its harness);
   * HARNESS_NOT_IN_IMAGE when that image does not hold the harness. Absent = not checked.
   */
  harnessImage?: (harness: HarnessName, image: string | undefined) => Promise<string>;
}

/** What each route plugin gets: the deps and the table its routes are declared in. */
export interface PluginDeps extends ApiDeps {
  routes: RouteTable;
}
