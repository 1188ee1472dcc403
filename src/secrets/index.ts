/** secrets: the host-side secret files (provider keys, per-agent secrets, the admin token). Never reach a sandbox. */
export { readAdminToken } from './admin-token.js';
export { SecretStore, type SecretStoreOptions } from './secret-store.js';
