/** Opens the store the configuration names: SQLite in the data dir, or a PostgreSQL database. */
import type { RetryPolicy } from '../core/index.js';
import { openPostgresStore } from './postgres/postgres-store.js';
import { openSqliteStore } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

export interface StoreSelection {
  /** ResolvedConfig.store: '' = SQLite at sqlitePath, else a postgres:// URL. */
  store: string;
  sqlitePath: string;
  leaseMs: number;
  retry: RetryPolicy;
  /** Connection trouble a PostgreSQL store rides out; a guarded transition that matched no row (either store). */
  onWarning?: (message: string, err: unknown) => void;
}

export async function openStore(s: StoreSelection): Promise<Store> {
  if (s.store === '')
    return openSqliteStore({
      path: s.sqlitePath,
      leaseMs: s.leaseMs,
      retry: s.retry,
      onWarning: s.onWarning,
    });
  return openPostgresStore({ url: s.store, leaseMs: s.leaseMs, retry: s.retry, onWarning: s.onWarning });
}
