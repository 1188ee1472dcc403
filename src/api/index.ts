/** api: the HTTP API (REST + SSE), its auth and tokens. */
export {
  assertListenAllowed,
  ensureAdminToken,
  isLoopbackAddress,
} from './api-tokens.js';
export { buildApp } from './app.js';
export type { ApiDeps } from './deps.js';
export { BerthMetrics, timeStoreCalls } from './metrics.js';
