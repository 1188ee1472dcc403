/** The gateway over a real Unix socket against a real SQLite store: the fence holds at the door. */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { pino } from 'pino';
import { testLifecycle } from '../../test/helpers/lifecycle.js';
import {
  agentSpecSchema,
  type ExecLine,
  type ExecOffer,
  systemClock,
  TurnInFlight,
  type TurnOutcome,
} from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { SandboxGateway } from './gateway-server.js';
import { signSandboxToken } from './token.js';
import type { SchedulePolicy } from './turn-schedules.js';

const SECRET = Buffer.from('k'.repeat(32));

interface GatewayReply {
  turnId?: string;
  value?: unknown;
  label?: string;
  error?: { code: string; message: string };
}

const BOOT_TOKEN = 'boot-token-of-this-sandbox';

/** A claimed session with a running turn, its gateway listening (bound unless `unbound`), and a client for it. */
async function setUp(
  t: TestContext,
  o: { sealError?: Error; unbound?: boolean; schedules?: SchedulePolicy } = {},
) {
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
  const turnRow = started.code === 'ok' ? started.value!.turn : assert.fail();
  const turnId = turnRow.id;
  const lifecycle = testLifecycle('sandbox-under-test');
  // What the supervisor hears: each outcome the gateway settles, once.
  const ended: TurnOutcome[] = [];
  lifecycle.onChange(() => {
    const outcome = lifecycle.turn?.outcome;
    if (outcome && ended.at(-1) !== outcome) ended.push(outcome);
  });
  const counters = { beats: 0, seals: 0, bootWaits: 0, checkpoints: [] as string[] };
  const socketPath = join(dir, 'gateway.sock');
  const log = pino({ level: 'silent' });
  const gateway = new SandboxGateway({
    lifecycle,
    socketPath,
    bootToken: BOOT_TOKEN,
    secret: SECRET,
    store,
    clock: systemClock,
    log,
    maxBodyBytes: 4096,
    longPollMs: 200,
    onBootWaiting: () => void counters.bootWaits++,
  });
  await gateway.listen();
  t.after(async () => {
    await gateway.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const tokenFor = (generation: number, secret = SECRET) =>
    signSandboxToken(secret, { sessionId: 's', generation, expiresAt: now + 60_000 });
  const token = tokenFor(binding.generation);
  const bind = () => {
    gateway.bind({
      fence: binding,
      assignment: { sessionId: 's', generation: binding.generation, token, heartbeatIntervalMs: 2000 },
      log,
      ...(o.schedules ? { schedules: o.schedules } : {}),
      hooks: {
        onHeartbeat: () => void counters.beats++,
        beforeCommit: async () => {
          counters.seals++;
          if (o.sealError) throw o.sealError;
          return undefined;
        },
        checkpoint: async (_turnId, label) => {
          counters.checkpoints.push(label);
          return {
            seq: counters.checkpoints.length,
            count: counters.checkpoints.length,
            label,
            bytes: 0,
            ms: 0,
          };
        },
        checkpointModelCall: async () => null,
      },
    });
    lifecycle.bind({ sessionId: 's', generation: binding.generation });
  };
  if (!o.unbound) bind();
  const call = (method: string, path: string, body?: unknown, as = token) =>
    new Promise<{ status: number; body: GatewayReply }>((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const headers = { authorization: `Bearer ${as}`, 'content-type': 'application/json' };
      const req = request({ socketPath, method, path, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : null });
        });
      });
      req.on('error', reject);
      req.end(payload);
    });
  const offer = () =>
    lifecycle.serve(
      new TurnInFlight(turnRow, {
        turnId,
        sessionId: 's',
        generation: binding.generation,
        attempt: 1,
        provider: 'command',
        messages: [],
        limits: { maxOutputBytes: 10, heartbeatIntervalMs: 2000 },
      }),
    );
  const replies = async () => (await store.listMessages('s', 0, 10)).filter((m) => m.direction === 'out');
  return {
    store,
    gateway,
    lifecycle,
    binding,
    bind,
    token,
    turnId,
    ended,
    counters,
    tokenFor,
    call,
    offer,
    replies,
  };
}

test('gateway: stale generation, foreign tokens and bad bodies write nothing', async (t) => {
  const { store, binding, turnId, ended, counters, tokenFor, call, offer, replies } = await setUp(t);
  assert.equal((await call('GET', '/v1/turn')).status, 204, 'long-poll answers 204 with no turn');
  offer();
  assert.equal((await call('GET', '/v1/turn')).body.turnId, turnId);
  assert.equal((await call('POST', '/v1/heartbeat', {})).status, 200);
  assert.equal(counters.beats, 1);

  const refused = [
    { token: tokenFor(binding.generation - 1), status: 409, code: 'STALE_GENERATION' },
    { token: tokenFor(binding.generation, Buffer.from('x'.repeat(32))), status: 401, code: 'UNAUTHORIZED' },
    { token: '', status: 401, code: 'UNAUTHORIZED' },
  ];
  for (const r of refused) {
    const res = await call('POST', '/v1/commit', { turnId, outputs: [{ text: 'evil' }] }, r.token);
    assert.equal(res.status, r.status);
    assert.equal(res.body.error?.code, r.code);
    assert.equal((await call('PUT', '/v1/state/k', { value: 'evil' }, r.token)).status, r.status);
  }
  const bad = await call('POST', '/v1/commit', { turnId });
  assert.equal(bad.status, 400);
  assert.match(bad.body.error?.message ?? '', /outputs/);
  const foreign = await call('POST', '/v1/commit', { turnId, outputs: [{ text: 'x', inReplyTo: [999] }] });
  assert.equal(foreign.status, 400, 'an output may answer only messages of its own turn');
  assert.match(foreign.body.error?.message ?? '', /answers message 999, which is not a message of this turn/);
  assert.equal((await call('PUT', '/v1/state/a%2Fb', { value: 1 })).status, 400, 'state keys are narrow');
  assert.equal((await replies()).length, 0);
  assert.equal(ended.length, 0);

  // The session is taken over (worker death): the old gateway's writes are now stale in the store itself.
  await store.removeWorker('w1');
  await store.reclaimExpiredLeases(Date.now());
  const lateCommit = await call('POST', '/v1/commit', { turnId, outputs: [{ text: 'late' }] });
  assert.equal(lateCommit.status, 409);
  assert.equal((await replies()).length, 0);
  assert.deepEqual(await store.getState('s'), {});
  const audit = await store.listAudit(0, 100);
  const kinds = (kind: string) => audit.filter((a) => a.kind === kind).length;
  assert.ok(kinds('stale-generation') >= 3, 'every refused stale request is audited');
  assert.equal(kinds('unauthorized'), 4, 'every refused foreign or forged token is audited');
  assert.equal(audit.length, kinds('stale-generation') + kinds('unauthorized'));
});

test('gateway: state a turn puts is visible to it and written only by its commit; a second commit is refused', async (t) => {
  const { store, turnId, ended, counters, call, offer, replies } = await setUp(t);
  offer();
  assert.equal((await call('GET', '/v1/state/counter')).status, 404);
  assert.equal((await call('PUT', '/v1/state/counter', { value: { n: 1 } })).status, 200);
  assert.deepEqual((await call('GET', '/v1/state/counter')).body.value, { n: 1 });
  assert.deepEqual(await store.getState('s'), {}, 'nothing committed yet');
  assert.equal((await call('POST', '/v1/commit', { turnId, outputs: [{ text: 'done' }] })).status, 200);
  assert.equal(counters.seals, 1, 'the layer is sealed before the commit');
  assert.deepEqual(await store.getState('s'), { counter: { n: 1 } });
  assert.equal((await store.getSessionView('s', Date.now()))?.pendingLayer, turnId);
  const again = await call('POST', '/v1/commit', { turnId, outputs: [{ text: 'twice' }] });
  assert.equal(again.status, 409, 'a second commit of the same turn writes nothing');
  assert.equal(counters.seals, 1, 'and seals nothing: the committed layer is never touched again');
  assert.deepEqual(
    (await replies()).map((m) => m.text),
    ['done'],
  );
  assert.deepEqual(ended, [{ kind: 'committed' }]);
});

test('gateway: a seal that fails (e.g. disk full) aborts the turn; nothing of it is committed', async (t) => {
  const { store, turnId, ended, call, offer, replies } = await setUp(t, {
    sealError: new Error('ENOSPC: no space left on device'),
  });
  offer();
  await call('PUT', '/v1/state/counter', { value: 1 });
  const res = await call('POST', '/v1/commit', { turnId, outputs: [{ text: 'done' }] });
  assert.equal(res.status, 500);
  assert.deepEqual(await store.getState('s'), {});
  assert.equal((await replies()).length, 0);
  assert.equal((await store.getTurn(turnId))?.status, 'aborted');
  assert.equal((await store.listMessages('s', 0, 1))[0]?.status, 'pending', 'the message is retried');
  assert.equal(ended[0]?.kind, 'aborted');
});

test('gateway: an unbound (warm) sandbox can only wait for its binding, with its boot token, and gets it once bound', async (t) => {
  const { lifecycle, bind, token, counters, call, offer } = await setUp(t, { unbound: true });
  assert.equal((await call('GET', '/v1/bind', undefined, 'wrong')).status, 401);
  assert.equal((await call('GET', '/v1/turn', undefined, token)).status, 401, 'no turn before the bind');
  assert.equal((await call('GET', '/v1/bind', undefined, BOOT_TOKEN)).status, 204, 'long-poll ends empty');
  const waiting = call('GET', '/v1/bind', undefined, BOOT_TOKEN);
  for (let i = 0; i < 100 && !lifecycle.runnerWaiting; i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(lifecycle.runnerWaiting, true, 'the runner is seen waiting: the sandbox is ready to bind');
  assert.ok(counters.bootWaits >= 2);
  bind();
  assert.equal(lifecycle.runnerWaiting, false);
  const bound = await waiting;
  assert.equal(bound.status, 200);
  assert.equal((bound.body as { token?: string }).token, token);
  assert.throws(bind, /already bound/, 'a sandbox serves one session');
  offer();
  assert.equal((await call('GET', '/v1/turn', undefined, token)).status, 200);
  const again = await call('GET', '/v1/bind', undefined, BOOT_TOKEN);
  assert.equal(
    (again.body as { token?: string }).token,
    token,
    'asking again after the bind answers at once',
  );
});

test('gateway: schedules a turn makes are written by its commit alone, within the agent cap', async (t) => {
  const { store, turnId, call, offer } = await setUp(t, { schedules: { agent: 'sh', cap: 2 } });
  const ask = (message: string, cron = '0 9 * * 1-5') =>
    call('POST', '/v1/schedules', { cron, tz: 'Europe/Paris', message });
  assert.equal((await ask('before any turn')).body.error?.code, 'TURN_NOT_FOUND');
  offer();
  const first = await ask('standup');
  assert.equal(first.status, 200);
  assert.ok((first.body as { nextRunAt: number }).nextRunAt > Date.now());
  const bad = await ask('never', '61 * * * *');
  assert.deepEqual([bad.status, bad.body.error?.code], [400, 'INVALID_INPUT']);
  assert.equal((await ask('report')).status, 200);
  const over = await ask('one too many');
  assert.deepEqual([over.status, over.body.error?.code], [429, 'SCHEDULE_LIMIT']);
  const listed = (await call('GET', '/v1/schedules')).body as unknown as {
    schedules: unknown[];
    heldUntilCommit: unknown[];
  };
  assert.deepEqual([listed.schedules.length, listed.heldUntilCommit.length], [0, 2]);
  assert.deepEqual(await store.listSchedules('s'), [], 'nothing is written before the commit');

  assert.equal((await call('POST', '/v1/commit', { turnId, outputs: [] })).status, 200);
  // Made in one transaction: the same created_at, so listed in id order (random); compare sorted.
  const made = (await store.listSchedules('s')).sort((a, b) => b.message.localeCompare(a.message));
  assert.deepEqual(
    made.map((s) => [s.message, s.tz, s.createdByTurn, s.status]),
    [
      ['standup', 'Europe/Paris', turnId, 'active'],
      ['report', 'Europe/Paris', turnId, 'active'],
    ],
  );
  assert.equal(await store.countAgentMadeSchedules('sh'), 2);
});

test('gateway: an aborted turn leaves none of its schedules', async (t) => {
  const { store, turnId, call, offer } = await setUp(t, { schedules: { agent: 'sh', cap: 5 } });
  offer();
  assert.equal((await call('POST', '/v1/schedules', { cron: '*/5 * * * *', message: 'ping' })).status, 200);
  assert.equal((await call('POST', '/v1/abort', { turnId, error: 'killed' })).status, 200);
  assert.deepEqual(await store.listSchedules('s'), []);
  assert.equal(await store.countAgentMadeSchedules('sh'), 0);
});

test('gateway: POST /v1/checkpoint reaches the hook with its label, only in an open turn and for the current generation', async (t) => {
  const { binding, turnId, counters, tokenFor, call, offer } = await setUp(t);
  const before = await call('POST', '/v1/checkpoint', { label: 'early' });
  assert.equal(before.status, 404, 'no turn, nothing to checkpoint');
  assert.equal(before.body.error?.code, 'TURN_NOT_FOUND');
  offer();
  assert.equal((await call('GET', '/v1/turn')).body.turnId, turnId);
  const taken = await call('POST', '/v1/checkpoint', { label: 'step-1: a colon too' });
  assert.equal(taken.status, 200);
  assert.deepEqual(taken.body, { seq: 1, count: 1, label: 'step-1: a colon too', bytes: 0, ms: 0 });
  assert.equal((await call('POST', '/v1/checkpoint', {})).body.label, '', 'the label is optional');
  const stale = await call('POST', '/v1/checkpoint', { label: 'late' }, tokenFor(binding.generation - 1));
  assert.equal(stale.status, 409);
  assert.equal(stale.body.error?.code, 'STALE_GENERATION');
  const bad = await call('POST', '/v1/checkpoint', { label: 'a\nb' });
  assert.equal(bad.status, 400, 'a label travels in an environment variable: no control characters');
  assert.equal((await call('POST', '/v1/checkpoint', { label: 'x'.repeat(201) })).status, 400);
  assert.deepEqual(counters.checkpoints, ['step-1: a colon too', '']);
});

test('gateway: a command reaches the runner’s exec poll, its output and exit reach its sink in order; a cancel is offered; a sandbox that ends ends its command SANDBOX_RESTARTED', async (t) => {
  const { gateway, lifecycle, binding, tokenFor, call } = await setUp(t);
  const take = async () => (await call('GET', '/v1/exec')).body as unknown as ExecOffer;
  const request = { command: 'echo hi', timeoutMs: 1000, maxOutputBytes: 10 };
  const lines: ExecLine[] = [];
  const waiting = take();
  gateway.exec.start(request, (l) => lines.push(l));
  const offered = await waiting;
  assert.deepEqual(offered, { kind: 'start', execId: offered.execId, ...request });
  const stale = await call('GET', '/v1/exec', undefined, tokenFor(binding.generation - 1));
  assert.equal(stale.status, 409, 'a replaced runner takes no command');
  for (const [path, body] of [
    ['/v1/exec/output', { execId: offered.execId, stream: 'stdout', data: 'h' }],
    ['/v1/exec/output', { execId: offered.execId, stream: 'stderr', data: 'i' }],
    ['/v1/exec/exit', { execId: offered.execId, exitCode: 0 }],
    ['/v1/exec/output', { execId: offered.execId, stream: 'stdout', data: 'after the end' }],
  ] as const)
    assert.equal((await call('POST', path, body)).status, 200);
  assert.deepEqual(lines, [
    { type: 'stdout', data: 'h' },
    { type: 'stderr', data: 'i' },
    { type: 'exit', exitCode: 0 },
  ]);

  const cancel = gateway.exec.start(request, () => undefined);
  const second = await take();
  cancel();
  assert.deepEqual(await take(), { kind: 'cancel', execId: second.execId });

  const cut: ExecLine[] = [];
  gateway.exec.start(request, (l) => cut.push(l));
  lifecycle.drain({ reason: 'SandboxExited', message: 'sandbox exited (exit code 137)' });
  gateway.exec.start(request, (l) => cut.push(l));
  assert.deepEqual(
    cut.map((l) => (l.type === 'error' ? [l.code, l.reason] : l.type)),
    [
      ['SANDBOX_RESTARTED', 'SandboxExited'],
      ['SANDBOX_RESTARTED', 'SandboxExited'],
    ],
  );
});
