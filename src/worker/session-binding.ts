/**
 * What a sandbox is bound to its session with (the gateway's side of the bind): the
 * session token and per-session settings the runner receives, and the doors the gateway
 * serves that session through — the model proxy (model agents), storage, egress with its
 * header rules, the agent's schedule tool. Everything per session travels here, at bind
 * time, so a warm sandbox serves any session without a restart.
 */
import type { Logger } from 'pino';
import { type Agent, egressRules, modelApiOf, type Session } from '../core/index.js';
import {
  type GatewayBinding,
  type GatewayHooks,
  ModelProxy,
  StorageRoutes,
  schedulePolicyOf,
  signSandboxToken,
} from '../gateway/index.js';
import type { Fence } from '../store/index.js';
import type { SandboxDeps } from './deps.js';

const TOKEN_TTL_MS = 7 * 24 * 3600 * 1000;

export function sessionBinding(
  deps: SandboxDeps,
  o: { agent: Agent; session: Session; fence: Fence; log: Logger; hooks: GatewayHooks },
): GatewayBinding {
  const { agent, session, fence, log } = o;
  const { config, clock } = deps;
  const token = signSandboxToken(deps.secret, {
    sessionId: session.id,
    generation: session.generation,
    expiresAt: clock.now() + TOKEN_TTL_MS,
  });
  const egress = egressRules(agent.egress);
  const isModelAgent = modelApiOf(agent.provider) !== null;
  return {
    fence,
    assignment: {
      sessionId: session.id,
      generation: session.generation,
      token,
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      ...(agent.mode === 'resident' ? { resident: true as const } : {}),
      // Only an agent with header rules has TLS terminated by the gateway: only its sandbox trusts the CA.
      ...(egress.some((r) => Object.keys(r.headers).length > 0)
        ? { egressCaPem: deps.egress.caCertificatePem }
        : {}),
    },
    log,
    ...(isModelAgent
      ? {
          modelProxy: new ModelProxy({
            agent,
            binding: fence,
            secrets: deps.secrets,
            upstreams: { anthropic: config.anthropicBaseUrl, openai: config.openaiBaseUrl },
            store: deps.store,
            clock,
            log,
            checkpoint: (turnId: string) => o.hooks.checkpointModelCall(turnId),
          }),
        }
      : {}),
    storage: new StorageRoutes({
      agent: agent.name,
      binding: fence,
      store: deps.store,
      blobs: deps.blobs,
      maxObjectBytes: config.storageMaxObjectBytes,
      clock,
      log,
    }),
    egress: { agent: agent.name, rules: egress, interceptor: deps.egress },
    schedules: schedulePolicyOf(agent),
    hooks: o.hooks,
  };
}
