/** gateway: the per-sandbox door (turn protocol, model proxy), with its tokens. */

export { EgressCa } from './egress-ca.js';
export { EgressInterceptor, type EgressInterceptorOptions } from './egress-intercept.js';
export type { ExecRelay, ExecSink, ExecStart } from './exec-relay.js';
export {
  type GatewayBinding,
  type GatewayHooks,
  type GatewayOptions,
  SandboxGateway,
} from './gateway-server.js';
export { readJson, sendJson } from './http-json.js';
export { ModelProxy, type ModelProxyOptions, type SecretSource } from './model-proxy.js';
export { SandboxAudit } from './sandbox-audit.js';
export { StorageRoutes, type StorageRoutesOptions } from './storage-routes.js';
export { signSandboxToken, type TokenClaims, verifySandboxToken } from './token.js';
export { type SchedulePolicy, schedulePolicyOf } from './turn-schedules.js';
