/** What the API needs from the host; passed to buildApp, never read from globals. */
import type { Clock, ResolvedConfig } from '../core/index.js';
import type { Store } from '../store/index.js';
import type { RouteTable } from './route-table.js';

export interface ApiDeps {
  config: ResolvedConfig;
  store: Store;
  clock: Clock;
}

/** What each route plugin gets: the deps and the table its routes are declared in. */
export interface PluginDeps extends ApiDeps {
  routes: RouteTable;
}
