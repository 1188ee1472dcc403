/** The /v1 resources end to end through the HTTP layer (app.inject, real SQLite): CRUD, pages, archive, OpenAPI. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { loadConfig, systemClock } from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';

async function setup() {
  const config = loadConfig({});
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const app = await buildApp({ config, store, clock: systemClock, log: pino({ level: 'silent' }) });
  const { token } = await issueToken(store, 'acme', '', Date.now());
  const call = async (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: object) => {
    const res = await app.inject({ method, url, payload, headers: { authorization: `Bearer ${token}` } });
    return { status: res.statusCode, body: res.body ? res.json() : null };
  };
  return { store, call };
}

test('agents: PUT creates, replaces the whole spec and says what changed; every wrong field is named', async () => {
  const { call } = await setup();
  const created = await call('PUT', '/v1/agents/f', {
    name: 'f',
    provider: 'command',
    memoryMb: 128,
    model: 'x',
  });
  assert.equal(created.status, 200);
  assert.equal(created.body.created, true);
  assert.deepEqual(created.body.changes, []);
  const { tenant: _, createdAt: __, ...spec } = created.body.agent;
  const again = await call('PUT', '/v1/agents/f', spec);
  assert.deepEqual([again.body.created, again.body.changes], [false, []], 'its own spec back: no change');
  // Left out = default (memoryMb) or unset (model): a replace, not a merge.
  const replaced = await call('PUT', '/v1/agents/f', { name: 'f', provider: 'command', mode: 'resident' });
  assert.deepEqual(replaced.body.changes, [
    { path: 'memoryMb', from: 128, to: 512 },
    { path: 'mode', from: 'ephemeral', to: 'resident' },
    { path: 'model', from: 'x' },
  ]);
  assert.equal((await call('GET', '/v1/agents/f')).body.model, undefined);
  const bad = await call('PUT', '/v1/agents/f', {
    name: 'f',
    provider: 'command',
    memoryMb: 1,
    egress: ['nope'],
  });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.code, 'INVALID_INPUT');
  assert.match(bad.body.error.message, /memoryMb: .*; egress\[0\]: "nope" is not valid/);
  const misnamed = await call('PUT', '/v1/agents/f', { name: 'g', provider: 'command' });
  assert.match(misnamed.body.error.message, /the body names g, the URL f/);
});

test('agents: create, list, get, patch, delete (refused while a live session uses it)', async () => {
  const { store, call } = await setup();
  assert.equal((await call('POST', '/v1/agents', { name: 'sh', provider: 'command' })).status, 201);
  assert.equal(
    (await call('POST', '/v1/agents', { name: 'sh', provider: 'command' })).body.error.code,
    'AGENT_EXISTS',
  );
  assert.deepEqual(
    (await call('GET', '/v1/agents')).body.agents.map((a: { name: string }) => a.name),
    ['sh'],
  );
  const patched = await call('PATCH', '/v1/agents/sh', { memoryMb: 128, instructions: 'be brief' });
  assert.equal(patched.status, 200);
  assert.equal(patched.body.memoryMb, 128);
  assert.equal(patched.body.provider, 'command');
  assert.equal((await call('GET', '/v1/agents/sh')).body.instructions, 'be brief');
  const rename = await call('PATCH', '/v1/agents/sh', { name: 'other' });
  assert.equal(rename.status, 400);
  assert.match(rename.body.error.message, /name/);
  const tooSmall = await call('PATCH', '/v1/agents/sh', { memoryMb: 1 });
  assert.match(tooSmall.body.error.message, /memoryMb/);

  await call('POST', '/v1/sessions', { id: 's1', agent: 'sh' });
  const inUse = await call('DELETE', '/v1/agents/sh');
  assert.equal(inUse.status, 409);
  assert.equal(inUse.body.error.code, 'AGENT_IN_USE');
  assert.equal((await call('DELETE', '/v1/sessions/s1')).body.status, 'archived');
  assert.equal((await call('DELETE', '/v1/agents/sh')).status, 204);
  assert.equal((await call('GET', '/v1/agents/sh')).status, 404);
  assert.equal(
    (await call('POST', '/v1/agents', { name: 'sh', provider: 'script' })).status,
    201,
    'name free again',
  );
  await store.close();
});

test('sessions: create, list with filters, get with ETA fields, archive stops it taking messages', async () => {
  const { store, call } = await setup();
  await call('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const created = await call('POST', '/v1/sessions', { agent: 'sh' });
  assert.equal(created.status, 201);
  assert.match(created.body.id, /^s_/);
  assert.equal(created.body.status, 'idle');
  assert.equal(
    (await call('POST', '/v1/sessions', { id: created.body.id, agent: 'sh' })).body.error.code,
    'SESSION_EXISTS',
  );
  await call('POST', '/v1/sessions/q1/messages', { text: 'echo 1', agent: 'sh' });
  await call('POST', '/v1/sessions/q2/messages', { text: 'echo 2', agent: 'sh' });

  const queued = await call('GET', '/v1/sessions?status=queued');
  assert.deepEqual(
    queued.body.sessions.map((s: { id: string }) => s.id),
    ['q1', 'q2'],
  );
  assert.equal(queued.body.sessions[1].queuePosition, 2);
  assert.ok('etaMs' in queued.body.sessions[0], 'ETA is part of the view (null until a turn has run)');
  assert.equal((await call('GET', '/v1/sessions?agent=nobody')).body.sessions.length, 0);
  // A page at a time: `next` leads to the following page, and is null after the last.
  const pages: string[] = [];
  let next: string | null = '';
  while (next !== null) {
    const page = await call('GET', `/v1/sessions?limit=1${next ? `&after=${next}` : ''}`);
    pages.push(...page.body.sessions.map((s: { id: string }) => s.id));
    next = page.body.next;
  }
  assert.deepEqual(pages, [created.body.id, 'q1', 'q2']);
  const badCursor = await call('GET', '/v1/sessions?after=bm9wZQ');
  assert.equal(badCursor.status, 400);
  assert.equal(badCursor.body.error.code, 'INVALID_INPUT');
  const badFilter = await call('GET', '/v1/sessions?status=sleeping');
  assert.equal(badFilter.status, 400);
  assert.match(badFilter.body.error.message, /status/);
  assert.deepEqual(
    (await call('GET', '/v1/queue')).body.queue.map((q: { sessionId: string }) => q.sessionId),
    ['q1', 'q2'],
  );

  const archived = await call('DELETE', '/v1/sessions/q1');
  assert.equal(archived.body.status, 'archived');
  assert.ok(archived.body.archivedAt > 0);
  assert.equal((await call('DELETE', '/v1/sessions/q1')).status, 200, 'idempotent');
  const [message] = (await call('GET', '/v1/sessions/q1/messages')).body.messages;
  assert.equal(message.status, 'failed');
  assert.equal(message.errorCode, 'SESSION_ARCHIVED');
  const again = await call('POST', '/v1/sessions/q1/messages', { text: 'more' });
  assert.equal(again.status, 409);
  assert.equal(again.body.error.code, 'SESSION_ARCHIVED');
  assert.equal((await call('GET', '/v1/queue')).body.queue[0].sessionId, 'q2', 'q2 moves up');
  assert.equal((await call('GET', '/v1/queue')).body.queue[0].position, 1);
  const listed = (await call('GET', '/v1/sessions')).body.sessions.map((s: { id: string }) => s.id);
  assert.ok(!listed.includes('q1'), 'archived sessions are left out unless asked for');
  assert.ok(
    (await call('GET', '/v1/sessions?archived=true')).body.sessions.some(
      (s: { id: string }) => s.id === 'q1',
    ),
  );
  const events = await store.eventsAfter('q1', 0, 10);
  assert.deepEqual(
    events.map((e) => e.type),
    ['queued', 'archived'],
  );
  await store.close();
});

test('messages come a page at a time with a cursor; turns, workers, sandboxes are listed', async () => {
  const { store, call } = await setup();
  await call('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  for (let i = 0; i < 5; i++) await call('POST', '/v1/sessions/p/messages', { text: `m${i}`, agent: 'sh' });
  const texts: string[] = [];
  let after = 0;
  for (;;) {
    const page = await call('GET', `/v1/sessions/p/messages?after=${after}&limit=2`);
    texts.push(...page.body.messages.map((m: { text: string }) => m.text));
    if (page.body.next === null) break;
    after = page.body.next;
  }
  assert.deepEqual(texts, ['m0', 'm1', 'm2', 'm3', 'm4']);
  const badPage = await call('GET', '/v1/sessions/p/messages?limit=0');
  assert.equal(badPage.status, 400);
  assert.match(badPage.body.error.message, /limit/);
  assert.deepEqual((await call('GET', '/v1/sessions/p/turns')).body.turns, []);
  assert.deepEqual((await call('GET', '/v1/workers')).body.workers, []);
  assert.deepEqual((await call('GET', '/v1/sandboxes')).body.sandboxes, []);
  await store.close();
});

test('a queued message is cancelled (409 once a turn took it); the running turn is interrupted (409 when none runs)', async () => {
  const { store, call } = await setup();
  await call('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const first = (await call('POST', '/v1/sessions/c/messages', { text: 'one', agent: 'sh' })).body.message;
  const second = (await call('POST', '/v1/sessions/c/messages', { text: 'two' })).body.message;
  const none = await call('POST', '/v1/sessions/c/interrupt');
  assert.deepEqual([none.status, none.body.error.code], [409, 'NO_RUNNING_TURN']);
  const cancelled = await call('DELETE', `/v1/sessions/c/messages/${second.id}`);
  assert.deepEqual([cancelled.status, cancelled.body.message.status], [200, 'cancelled']);
  assert.equal((await call('DELETE', `/v1/sessions/c/messages/${second.id}`)).status, 200, 'again: the same');
  for (const [mid, status, code] of [
    ['x', 400, 'INVALID_INPUT'],
    ['0', 400, 'INVALID_INPUT'],
    ['999', 404, 'MESSAGE_NOT_FOUND'],
  ] as const) {
    const res = await call('DELETE', `/v1/sessions/c/messages/${mid}`);
    assert.deepEqual([res.status, res.body.error.code], [status, code], mid);
  }
  await store.registerWorker({
    id: 'w',
    host: 'h',
    pid: 1,
    slots: 1,
    heartbeatAt: Date.now(),
    startedAt: Date.now(),
  });
  const claim = await store.claimRunnableSession('w', Date.now());
  const started = await store.startTurn(
    { sessionId: 'c', generation: claim!.session.generation, workerId: 'w' },
    Date.now(),
  );
  assert.ok(started.code === 'ok' && started.value);
  const running = await call('DELETE', `/v1/sessions/c/messages/${first.id}`);
  assert.deepEqual([running.status, running.body.error.code], [409, 'MESSAGE_NOT_PENDING']);
  assert.ok(running.body.error.hint);
  const keep = await call('POST', '/v1/sessions/c/interrupt?discard=false');
  assert.equal(keep.status, 400);
  assert.match(keep.body.error.message, /discard: .*checkpoints/);
  const asked = await call('POST', `/v1/sessions/c/interrupt?discard=true&turn=${started.value.turn.id}`);
  assert.equal(asked.status, 202);
  assert.equal(asked.body.turn.id, started.value.turn.id);
  assert.equal(typeof asked.body.turn.interruptRequestedAt, 'number');
  await store.close();
});

test('unknown routes and methods are 404 JSON from the catalogue', async () => {
  const { store, call } = await setup();
  for (const [method, url] of [
    ['GET', '/v2/agents'],
    ['GET', '/nope'],
    ['PATCH', '/v1/sessions/x/messages'],
  ] as const) {
    const res = await call(method, url);
    assert.equal(res.status, 404, url);
    assert.equal(res.body.error.code, 'NOT_FOUND');
    assert.ok(res.body.error.hint);
  }
  await store.close();
});

test('the OpenAPI document lists every route with the schemas the API validates with', async () => {
  const { store, call } = await setup();
  const doc = (await call('GET', '/v1/openapi.json')).body;
  assert.equal(doc.openapi, '3.0.3');
  const expected = {
    '/v1/agents': ['get', 'post'],
    '/v1/agents/{name}': ['delete', 'get', 'patch', 'put'],
    '/v1/sessions': ['get', 'post'],
    '/v1/sessions/{id}': ['delete', 'get'],
    '/v1/sessions/{id}/messages': ['get', 'post'],
    '/v1/sessions/{id}/messages/{mid}': ['delete'],
    '/v1/sessions/{id}/interrupt': ['post'],
    '/v1/sessions/{id}/turns': ['get'],
    '/v1/sessions/{id}/events': ['get'],
    '/v1/events': ['get'],
    '/v1/queue': ['get'],
    '/v1/workers': ['get'],
    '/v1/sandboxes': ['get'],
    '/v1/status': ['get'],
    '/v1/tokens': ['get', 'post'],
    '/v1/tokens/{id}': ['delete'],
  };
  for (const [path, methods] of Object.entries(expected)) {
    assert.deepEqual(Object.keys(doc.paths[path] ?? {}).sort(), methods, path);
  }
  const post = doc.paths['/v1/sessions/{id}/messages'].post;
  const schema = post.requestBody.content['application/json'].schema;
  assert.deepEqual(schema.required, ['text']);
  assert.equal(schema.additionalProperties, false);
  assert.equal(schema.properties.text.minLength, 1);
  const agent = doc.paths['/v1/agents'].post.requestBody.content['application/json'].schema;
  assert.deepEqual(agent.properties.provider.enum, [
    'command',
    'script',
    'anthropic',
    'openai',
    'claude-code',
    'codex',
    'opencode',
  ]);
  const list = doc.paths['/v1/sessions'].get.parameters.map((p: { name: string }) => p.name);
  assert.deepEqual(list, ['status', 'agent', 'archived', 'after', 'limit']);
  assert.ok(doc.components.schemas.Error.properties.error.properties.hint);
  await store.close();
});

test('every keyset listing: pages follow `next` to the end; a bad cursor or limit is 400 INVALID_INPUT naming the fix', async () => {
  const { store, call } = await setup();
  const { token: admin } = await issueToken(store, null, '', Date.now());
  const app = await buildApp({
    config: loadConfig({}),
    store,
    clock: systemClock,
    log: pino({ level: 'silent' }),
  });
  const asAdmin = async (url: string) => {
    const res = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${admin}` } });
    return { status: res.statusCode, body: res.json() };
  };
  await call('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  await call('POST', '/v1/agents', { name: 'sh2', provider: 'command' });
  for (const prefix of ['a/', 'b/']) await call('POST', '/v1/agents/sh/grants', { prefix, ops: ['read'] });
  for (const id of ['q1', 'q2'])
    await call('POST', `/v1/sessions/${id}/messages`, { text: 'x', agent: 'sh' });
  for (let i = 0; i < 2; i++)
    await call('POST', '/v1/sessions/q1/schedules', { cron: '0 9 * * *', message: 'x' });
  for (let i = 0; i < 2; i++) await call('POST', '/v1/webhooks', { url: 'http://127.0.0.1:1/', agent: 'sh' });
  // The paged listings, as the OpenAPI document shows them: a string `after` and a `limit`.
  const spec = (await call('GET', '/v1/openapi.json')).body as {
    paths: Record<
      string,
      { get?: { parameters?: { name: string; in: string; schema: { type?: string } }[] } }
    >;
  };
  const paged = Object.entries(spec.paths)
    .filter(([, p]) => p.get?.parameters?.some((x) => x.name === 'after' && x.schema.type === 'string'))
    .map(([path]) => path)
    // Storage objects are paged by key: `after` is the last key itself, as in the gateway.
    .filter((path) => path !== '/v1/agents/{name}/storage')
    .sort();
  /** Each listing's URL here, and how many rows it has (turns and channels: none). */
  const urls: Record<string, [string, number]> = {
    '/v1/agents': ['/v1/agents', 2],
    '/v1/agents/{name}/grants': ['/v1/agents/sh/grants', 2],
    '/v1/channels': ['/v1/channels', 0],
    '/v1/channels/{id}/outbox': ['/v1/channels/none/outbox', 0],
    '/v1/queue': ['/v1/queue', 2],
    '/v1/schedules': ['/v1/schedules', 2],
    '/v1/sessions': ['/v1/sessions', 2],
    '/v1/sessions/{id}/schedules': ['/v1/sessions/q1/schedules', 2],
    '/v1/sessions/{id}/turns': ['/v1/sessions/q1/turns', 0],
    '/v1/tokens': ['/v1/tokens', 2],
    '/v1/webhooks': ['/v1/webhooks', 2],
  };
  assert.deepEqual(paged, Object.keys(urls), 'every paged listing is checked here');
  for (const [url, rows] of Object.values(urls)) {
    const get =
      url.startsWith('/v1/tokens') || url.startsWith('/v1/channels')
        ? asAdmin
        : (u: string) => call('GET', u);
    for (const query of ['after=bm9wZQ', 'limit=0', 'limit=501', 'limit=x']) {
      const bad = await get(`${url}?${query}`);
      if (url.endsWith('/outbox') && query.startsWith('after')) continue;
      assert.equal(bad.status, 400, `${url}?${query}`);
      assert.equal(bad.body.error.code, 'INVALID_INPUT');
      if (query.startsWith('after'))
        assert.match(bad.body.error.message, /pass the "next" of the previous page/);
      else assert.match(bad.body.error.message, /limit/);
    }
    if (url.endsWith('/outbox')) continue;
    let items = 0;
    let next: string | null = null;
    let pages = 0;
    do {
      const page = await get(`${url}?limit=1${next ? `&after=${next}` : ''}`);
      assert.equal(page.status, 200, url);
      const list = Object.values(page.body).find(Array.isArray) as unknown[];
      items += list.length;
      next = page.body.next;
      pages++;
    } while (next !== null && pages < 10);
    assert.deepEqual([items, next], [rows, null], `${url}: the pages end, having listed each row once`);
  }
});
