/** What the API needs from the host; passed to buildApp, never read from globals. */
import type { Clock, ResolvedConfig } from '../core/index.js';
import type { Store } from '../store/index.js';

export interface ApiDeps {
  config: ResolvedConfig;
  store: Store;
  clock: Clock;
}
