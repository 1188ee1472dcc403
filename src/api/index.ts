/** api: the HTTP API (REST + SSE), its auth and tokens. */
export {
  ADMIN_TOKEN_FILE,
  assertListenAllowed,
  ensureAdminToken,
  isLoopbackAddress,
  readAdminToken,
} from './api-tokens.js';
export { buildApp } from './app.js';
export { CHAOS_REPORTS_DIR } from './chaos-routes.js';
export type { ApiDeps } from './deps.js';
export { BerthMetrics, timeStoreCalls } from './metrics.js';
export { type DeliveryOutcome, WebhookDispatcher } from './webhook-dispatcher.js';
