/** Auth and tenant isolation at the API: 401 without a live token, 404 (never 403) for another tenant's things. Real SQLite, app.inject(). */
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { loadConfig, systemClock } from '../core/index.js';
import { readAdminToken } from '../secrets/index.js';
import { openSqliteStore } from '../store/index.js';
import { assertListenAllowed, ensureAdminToken, issueToken } from './api-tokens.js';
import { buildApp } from './app.js';

async function setup() {
  const config = loadConfig({});
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const app = await buildApp({ config, store, clock: systemClock, log: pino({ level: 'silent' }) });
  const now = Date.now();
  const acme = (await issueToken(store, 'acme', 'a', now)).token;
  const globex = (await issueToken(store, 'globex', 'g', now)).token;
  const admin = (await issueToken(store, null, 'admin', now)).token;
  const call = (
    token: string | null,
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    payload?: object,
  ) => app.inject({ method, url, payload, headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { app, store, call, acme, globex, admin };
}

test('no token, a malformed header, an unknown or revoked token: 401 with the fix', async () => {
  const { app, store, call, acme, admin } = await setup();
  const cases: [string, Record<string, string>][] = [
    ['no header', {}],
    ['not bearer', { authorization: `Basic ${acme}` }],
    ['unknown token', { authorization: 'Bearer berth_nope' }],
  ];
  for (const [name, headers] of cases) {
    const res = await app.inject({ method: 'GET', url: '/v1/sessions', headers });
    assert.equal(res.statusCode, 401, name);
    assert.equal(res.json().error.code, 'API_TOKEN_INVALID', name);
    assert.match(res.json().error.hint, /berth token create/, name);
  }
  const [row] = (await store.listApiTokens()).filter((t) => t.tenant === 'acme');
  assert.equal((await call(admin, 'DELETE', `/v1/tokens/${row!.tokenId}`)).statusCode, 204);
  assert.equal((await call(acme, 'GET', '/v1/agents')).statusCode, 401, 'revoked');
  assert.equal((await call(admin, 'DELETE', `/v1/tokens/${row!.tokenId}`)).statusCode, 404, 'revoked twice');
  assert.equal((await call(null, 'GET', '/v1/openapi.json')).statusCode, 200, 'the document is public');
  assert.equal((await call(null, 'GET', '/healthz')).statusCode, 200);
  await store.close();
});

test("a tenant sees and touches only its own agents and sessions; another's are 404", async () => {
  const { store, call, acme, globex, admin } = await setup();
  assert.equal(
    (await call(acme, 'POST', '/v1/agents', { name: 'a-sh', provider: 'command' })).statusCode,
    201,
  );
  const posted = await call(acme, 'POST', '/v1/sessions/a1/messages', { text: 'echo', agent: 'a-sh' });
  assert.equal(posted.statusCode, 202);
  assert.equal(posted.json().session.tenant, 'acme');

  const hidden: [string, 'GET' | 'POST' | 'PATCH' | 'DELETE', string, object?][] = [
    ['get session', 'GET', '/v1/sessions/a1'],
    ['messages', 'GET', '/v1/sessions/a1/messages'],
    ['turns', 'GET', '/v1/sessions/a1/turns'],
    ['events', 'GET', '/v1/sessions/a1/events'],
    ['post to it', 'POST', '/v1/sessions/a1/messages', { text: 'x' }],
    ['archive it', 'DELETE', '/v1/sessions/a1'],
    ['get agent', 'GET', '/v1/agents/a-sh'],
    ['patch agent', 'PATCH', '/v1/agents/a-sh', { memoryMb: 64 }],
    ['delete agent', 'DELETE', '/v1/agents/a-sh'],
    ['use agent', 'POST', '/v1/sessions/g1/messages', { text: 'x', agent: 'a-sh' }],
    ['session on agent', 'POST', '/v1/sessions', { agent: 'a-sh' }],
  ];
  for (const [name, method, url, body] of hidden) {
    const res = await call(globex, method, url, body);
    assert.equal(res.statusCode, 404, `${name}: ${res.body}`);
    assert.match(res.json().error.code, /_NOT_FOUND$/, name);
  }
  const lists = await Promise.all(
    ['/v1/sessions', '/v1/agents', '/v1/queue', '/v1/sandboxes'].map((u) => call(globex, 'GET', u)),
  );
  for (const res of lists) assert.deepEqual(Object.values(res.json())[0], [], res.body);
  assert.equal((await call(globex, 'GET', '/v1/status')).json().counts.sessions, 0, 'counts are per tenant');

  // The owner and the operator see it.
  assert.equal((await call(acme, 'GET', '/v1/sessions/a1')).statusCode, 200);
  assert.equal((await call(acme, 'GET', '/v1/queue')).json().queue[0].sessionId, 'a1');
  assert.equal((await call(admin, 'GET', '/v1/sessions/a1')).json().tenant, 'acme');
  assert.equal((await call(admin, 'GET', '/v1/sessions')).json().sessions.length, 1);
  // The operator's new session on a tenant's agent belongs to that tenant.
  assert.equal(
    (await call(admin, 'POST', '/v1/sessions', { id: 'a2', agent: 'a-sh' })).json().tenant,
    'acme',
  );
  // Nothing of acme's changed.
  assert.equal((await store.getAgent('a-sh'))?.memoryMb, 512);
  assert.equal((await store.listMessages('a1', 0, 10)).length, 1);
  await store.close();
});

test('tokens are admin-only, hashed at rest, and shown once', async () => {
  const { store, call, acme, admin } = await setup();
  const denied = await call(acme, 'POST', '/v1/tokens', { tenant: 'acme' });
  assert.equal(denied.statusCode, 403);
  assert.equal(denied.json().error.code, 'ADMIN_ONLY');
  const issued = await call(admin, 'POST', '/v1/tokens', { tenant: 'initech', label: 'ci' });
  assert.equal(issued.statusCode, 201);
  const { token, id } = issued.json();
  assert.match(token, /^berth_/);
  const listed = await call(admin, 'GET', '/v1/tokens');
  assert.ok(!listed.body.includes(token), 'the secret is never listed');
  assert.ok(listed.json().tokens.some((t: { tokenId: string }) => t.tokenId === id));
  assert.equal((await call(token, 'GET', '/v1/agents')).statusCode, 200);
  const bad = await call(admin, 'POST', '/v1/tokens', { tenant: 'a b' });
  assert.equal(bad.statusCode, 400);
  assert.match(bad.json().error.message, /tenant/);
  await store.close();
});

test("a token sets its tenant's weight in the fair share of claims; a bad weight is refused naming the fix", async () => {
  const { store, call, acme, admin } = await setup();
  const bad = await call(admin, 'POST', '/v1/tokens', { tenant: 'initech', weight: 0 });
  assert.equal(bad.statusCode, 400);
  assert.match(bad.json().error.message, /weight: at least 1/);
  const issued = await call(admin, 'POST', '/v1/tokens', { tenant: 'initech', weight: 3 });
  assert.equal(issued.statusCode, 201);
  const initech = issued.json().token;
  for (const [token, agent] of [
    [acme, 'acme-agent'],
    [initech, 'initech-agent'],
  ] as const) {
    assert.equal(
      (await call(token, 'POST', '/v1/agents', { name: agent, provider: 'command' })).statusCode,
      201,
    );
  }
  const send = (token: string, agent: string, id: string) =>
    call(token, 'POST', `/v1/sessions/${id}/messages`, { agent, text: 'go' });
  for (const id of ['acme-1', 'acme-2']) assert.equal((await send(acme, 'acme-agent', id)).statusCode, 202);
  for (const id of ['i-1', 'i-2', 'i-3', 'i-4'])
    assert.equal((await send(initech, 'initech-agent', id)).statusCode, 202);
  // Weight 3: initech's four turns come before acme's second (at 1:1 they would alternate).
  const positions = await store.queuePositions(Date.now());
  assert.deepEqual(
    [...positions].sort((a, b) => a[1] - b[1]).map(([id]) => id),
    ['acme-1', 'i-1', 'i-2', 'i-3', 'i-4', 'acme-2'],
  );
  await store.close();
});

test('the admin token file is 0600, stable across starts, and listening beyond loopback needs a tenant token', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-auth-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const config = loadConfig({});
  const store = openSqliteStore({ path: join(dir, 'store.db'), leaseMs: config.leaseMs, retry: config });
  const first = await ensureAdminToken(store, dir, Date.now());
  assert.equal((await stat(join(dir, 'admin-token'))).mode & 0o777, 0o600);
  assert.equal(await ensureAdminToken(store, dir, Date.now()), first);
  assert.equal(await readAdminToken(dir), first);
  assert.equal((await store.listApiTokens()).length, 1);
  await assertListenAllowed(store, '127.0.0.1');
  await assert.rejects(
    assertListenAllowed(store, '0.0.0.0'),
    /Refusing to listen on 0\.0\.0\.0.*no tenant token/,
  );
  await issueToken(store, 'acme', '', Date.now());
  await assertListenAllowed(store, '0.0.0.0');
  await store.close();
});

test("storage grants: a tenant manages its own agents' grants; another tenant's agent is 404", async () => {
  const { store, call, acme, globex, admin } = await setup();
  assert.equal(
    (await call(acme, 'POST', '/v1/agents', { name: 'bot', provider: 'command' })).statusCode,
    201,
  );
  const granted = await call(acme, 'POST', '/v1/agents/bot/grants', {
    prefix: 'photos/',
    ops: ['list', 'read'],
  });
  assert.equal(granted.statusCode, 201);
  assert.deepEqual(granted.json().ops, ['read', 'list']);
  const bad = await call(acme, 'POST', '/v1/agents/bot/grants', { prefix: 'photos', ops: ['read'] });
  assert.equal(bad.statusCode, 400);
  assert.match(bad.json().error.message, /prefix: must end with "\/"/);
  const traversal = await call(acme, 'POST', '/v1/agents/bot/grants', { prefix: '../', ops: ['read'] });
  assert.match(traversal.json().error.message, /"\.\." segment/);
  for (const [method, url, body] of [
    ['GET', '/v1/agents/bot/grants'],
    ['POST', '/v1/agents/bot/grants', { prefix: '', ops: ['read'] }],
    ['DELETE', '/v1/agents/bot/grants?prefix=photos/'],
    ['GET', '/v1/agents/bot/storage'],
  ] as const) {
    const res = await call(globex, method, url, body);
    assert.equal(res.statusCode, 404, `${method} ${url} by another tenant`);
    assert.equal(res.json().error.code, 'AGENT_NOT_FOUND');
  }
  assert.deepEqual(
    (await call(admin, 'GET', '/v1/agents/bot/grants'))
      .json()
      .grants.map((g: { prefix: string }) => g.prefix),
    ['photos/'],
    'the operator sees every tenant',
  );
  assert.deepEqual((await call(acme, 'GET', '/v1/agents/bot/storage?prefix=photos/')).json(), {
    objects: [],
    next: null,
  });
  assert.equal((await call(acme, 'DELETE', '/v1/agents/bot/grants?prefix=photos/')).statusCode, 204);
  const again = await call(acme, 'DELETE', '/v1/agents/bot/grants?prefix=photos/');
  assert.equal(again.json().error.code, 'GRANT_NOT_FOUND');
  assert.deepEqual((await call(acme, 'GET', '/v1/agents/bot/grants')).json(), { grants: [], next: null });
  await store.close();
});
