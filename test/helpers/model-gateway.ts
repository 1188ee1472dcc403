/**
 * A sandbox gateway with its model proxy in this process, for tests and benchmarks: a
 * SQLite store in memory with a claimed session and an open turn of agent `a`, a secret
 * store holding KEY under the provider's name, and a fake provider (fake-models.ts) as
 * the upstream. Callers talk to it as a sandbox does: over the socket, with a token.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import {
  type AgentSpecInput,
  agentSpecSchema,
  modelApiOf,
  systemClock,
  type Turn,
  TurnInFlight,
} from '../../src/core/index.js';
import { ModelProxy, SandboxGateway, signSandboxToken } from '../../src/gateway/index.js';
import { SecretStore } from '../../src/secrets/index.js';
import { openSqliteStore, type Store } from '../../src/store/index.js';
import { type FakeModelServer, type ScriptStep, startFakeAnthropic, startFakeOpenAI } from './fake-models.js';
import { testLifecycle } from './lifecycle.js';

export const UPSTREAM_KEY = 'sk-test-upstream-key-0123456789';
const TOKEN_SECRET = Buffer.from('t'.repeat(32));

export interface ModelGateway {
  store: Store;
  fake: FakeModelServer;
  turn: Turn;
  socketPath: string;
  /** A sandbox token for the session: of its generation, or of `generation`. */
  token(generation?: number): string;
  close(): Promise<void>;
}

export async function startModelGateway(
  agent: Omit<AgentSpecInput, 'name'>,
  script: ScriptStep[],
  /** The model-call checkpoint the proxy takes before it forwards. @default none */
  checkpoint?: (turnId: string) => Promise<unknown>,
): Promise<ModelGateway> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-proxy-'));
  const provider = modelApiOf(agent.provider)!;
  const fake = provider === 'anthropic' ? await startFakeAnthropic(script) : await startFakeOpenAI(script);
  const store = openSqliteStore({
    path: ':memory:',
    leaseMs: 10_000,
    retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 },
  });
  const secrets = new SecretStore({ path: join(dir, 'secrets.json'), key: 'test-key' });
  await secrets.set(provider, UPSTREAM_KEY);
  const now = Date.now();
  const created = await store.createAgent(agentSpecSchema.parse({ name: 'a', ...agent }), now);
  await store.registerWorker({ id: 'w1', host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
  await store.enqueueMessage({ sessionId: 's', agent: 'a', text: 'hi', now });
  const claim = (await store.claimRunnableSession('w1', now))!;
  const binding = { sessionId: 's', generation: claim.session.generation, workerId: 'w1' };
  const started = await store.startTurn(binding, now);
  if (started.code !== 'ok' || !started.value) throw new Error('no turn started');
  const turn = started.value.turn;
  const log = pino({ level: 'silent' });
  const shared = { binding, store, clock: systemClock, log };
  const upstreams = { anthropic: fake.url, openai: fake.url };
  const socketPath = join(dir, 'gateway.sock');
  const token = (generation = binding.generation) =>
    signSandboxToken(TOKEN_SECRET, { sessionId: 's', generation, expiresAt: Date.now() + 60_000 });
  const lifecycle = testLifecycle('model-gateway-test');
  const gateway = new SandboxGateway({
    lifecycle,
    socketPath,
    bootToken: 'boot-token-of-this-test-sandbox',
    secret: TOKEN_SECRET,
    store,
    clock: systemClock,
    log,
    maxBodyBytes: 1 << 20,
  });
  gateway.bind({
    fence: binding,
    assignment: { sessionId: 's', generation: binding.generation, token: token(), heartbeatIntervalMs: 1000 },
    log,
    hooks: {
      onHeartbeat: () => {},
      beforeCommit: async () => undefined,
      checkpoint: () => Promise.reject(new Error('no checkpoints in this test')),
      checkpointModelCall: async () => null,
    },
    modelProxy: new ModelProxy({
      ...shared,
      agent: created,
      secrets,
      upstreams,
      ...(checkpoint ? { checkpoint } : {}),
    }),
  });
  lifecycle.bind({ sessionId: 's', generation: binding.generation });
  lifecycle.serve(
    new TurnInFlight(turn, {
      turnId: turn.id,
      sessionId: 's',
      generation: binding.generation,
      attempt: 1,
      provider,
      messages: [],
      limits: { maxOutputBytes: 1000, heartbeatIntervalMs: 1000 },
    }),
  );
  await gateway.listen();
  return {
    store,
    fake,
    turn,
    socketPath,
    token,
    async close() {
      await gateway.close();
      await fake.close();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
