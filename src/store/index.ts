/** store: the durable state behind one interface of transitions. */
export type { AuditEntry, EnqueueInput, Fence, FenceCode, Fenced, Store, StoreChange } from './store.js';
export { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js';
export { fenceError } from './fence-error.js';
