/** gateway: the per-sandbox door (turn protocol), with its tokens. */
export {
  type GatewayBinding,
  type GatewayHooks,
  type GatewayOptions,
  SandboxGateway,
  type TurnEnd,
} from './gateway-server.js';
export { signSandboxToken, type TokenClaims, verifySandboxToken } from './token.js';
