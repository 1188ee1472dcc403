/** store: the durable state behind one interface of transitions. */

export { fenceError } from './fence-error.js';
export { openStore, type StoreSelection } from './open-store.js';
export { openPostgresStore, type PostgresStoreOptions, RETRY_BUDGET_MS } from './postgres/postgres-store.js';
export { connectToPrimary } from './postgres/primary-pool.js';
export { FAILED_CALL_WARNINGS, STORE_WARNINGS } from './postgres/store-warnings.js';
export type * from './roles.js';
export { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js';
export type * from './store.js';
