/** secrets: the host-side secret store (provider keys, per-agent secrets). Never reaches a sandbox. */
export { SecretStore, type SecretStoreOptions } from './secret-store.js';
