/** store: the durable state behind one interface of transitions. */

export { fenceError } from './fence-error.js';
export { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js';
export type {
  AuditEntry,
  CreateSessionInput,
  EnqueueInput,
  Fence,
  FenceCode,
  Fenced,
  NewApiToken,
  Store,
  StoreChange,
} from './store.js';
