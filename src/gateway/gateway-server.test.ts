/** The gateway over a real Unix socket against a real SQLite store: the fence holds at the door. */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { agentSpecSchema, systemClock } from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { SandboxGateway, type TurnEnd } from './gateway-server.js';
import { signSandboxToken } from './token.js';

const SECRET = Buffer.from('k'.repeat(32));

interface GatewayReply {
  turnId?: string;
  error?: { code: string; message: string };
}

function call(socketPath: string, token: string, method: string, path: string, body?: unknown) {
  return new Promise<{ status: number; body: GatewayReply }>((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        socketPath,
        method,
        path,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : null });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

test('gateway: current generation commits; stale generation, foreign tokens and bad bodies write nothing', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-gw-'));
  const store = openSqliteStore({
    path: ':memory:',
    leaseMs: 10_000,
    retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 },
  });
  const now = Date.now();
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), now);
  await store.registerWorker({ id: 'w1', host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
  await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'echo', now });
  const claim = (await store.claimRunnableSession('w1', now))!;
  const binding = { sessionId: 's', generation: claim.session.generation, workerId: 'w1' };
  const started = await store.startTurn(binding, now);
  const turnId = started.code === 'ok' ? started.value!.turn.id : assert.fail();

  const ended: TurnEnd[] = [];
  let beats = 0;
  const socketPath = join(dir, 'gateway.sock');
  const gateway = new SandboxGateway({
    socketPath,
    binding,
    secret: SECRET,
    store,
    clock: systemClock,
    log: pino({ level: 'silent' }),
    maxBodyBytes: 4096,
    longPollMs: 200,
    hooks: { onHeartbeat: () => void beats++, onTurnEnded: (_id, end) => void ended.push(end) },
  });
  await gateway.listen();
  t.after(async () => {
    await gateway.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const expiresAt = now + 60_000;
  const token = signSandboxToken(SECRET, { sessionId: 's', generation: binding.generation, expiresAt });
  const staleToken = signSandboxToken(SECRET, {
    sessionId: 's',
    generation: binding.generation - 1,
    expiresAt,
  });
  const foreignToken = signSandboxToken(Buffer.from('x'.repeat(32)), {
    sessionId: 's',
    generation: binding.generation,
    expiresAt,
  });

  assert.equal(
    (await call(socketPath, token, 'GET', '/v1/turn')).status,
    204,
    'long-poll answers 204 with no turn',
  );
  gateway.offerTurn({
    turnId,
    sessionId: 's',
    generation: binding.generation,
    attempt: 1,
    provider: 'command',
    messages: [],
    limits: { maxOutputBytes: 10, heartbeatIntervalMs: 2000 },
  });
  assert.equal((await call(socketPath, token, 'GET', '/v1/turn')).body.turnId, turnId);
  assert.equal((await call(socketPath, token, 'POST', '/v1/heartbeat', {})).status, 200);
  assert.equal(beats, 1);

  const refused = [
    { token: staleToken, status: 409, code: 'STALE_GENERATION' },
    { token: foreignToken, status: 401, code: 'UNAUTHORIZED' },
    { token: '', status: 401, code: 'UNAUTHORIZED' },
  ];
  for (const r of refused) {
    const res = await call(socketPath, r.token, 'POST', '/v1/commit', {
      turnId,
      outputs: [{ text: 'evil' }],
    });
    assert.equal(res.status, r.status);
    assert.equal(res.body.error?.code, r.code);
  }
  const bad = await call(socketPath, token, 'POST', '/v1/commit', { turnId });
  assert.equal(bad.status, 400);
  assert.match(bad.body.error?.message ?? '', /outputs/);
  assert.equal((await store.listMessages('s', 0, 10)).filter((m) => m.direction === 'out').length, 0);
  assert.equal(ended.length, 0);

  // The session is taken over (worker death): the old gateway's writes are now stale in the store itself.
  await store.removeWorker('w1');
  await store.reclaimExpiredLeases(Date.now());
  const lateCommit = await call(socketPath, token, 'POST', '/v1/commit', {
    turnId,
    outputs: [{ text: 'late' }],
  });
  assert.equal(lateCommit.status, 409);
  assert.equal((await store.listMessages('s', 0, 10)).filter((m) => m.direction === 'out').length, 0);
  const audit = await store.listAudit(0, 10);
  assert.deepEqual(
    audit.map((a) => [a.kind, a.generation]),
    [
      ['stale-generation', binding.generation - 1],
      ['stale-generation', binding.generation],
    ],
  );
});
