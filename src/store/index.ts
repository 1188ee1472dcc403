/** store: the durable state behind one interface of transitions. */

export { fenceError } from './fence-error.js';
export { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js';
export type {
  AttemptResult,
  AuditEntry,
  CreateSessionInput,
  EnqueueInput,
  Fence,
  FenceCode,
  Fenced,
  NewApiToken,
  NewWebhook,
  Store,
  StoreChange,
  TakenDelivery,
} from './store.js';
