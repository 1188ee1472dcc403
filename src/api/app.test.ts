/** Bad input at the API: a 4xx that says what is wrong, and nothing stored. Real SQLite, app.inject(). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { loadConfig, systemClock } from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';

async function setup() {
  const config = loadConfig({ BERTH_MAX_MESSAGE_BYTES: '1024' });
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const built = await buildApp({ config, store, clock: systemClock, log: pino({ level: 'silent' }) });
  const { token } = await issueToken(store, 'acme', 'test', Date.now());
  const authorization = `Bearer ${token}`;
  const app = {
    inject: (o: {
      method: 'GET' | 'POST';
      url: string;
      payload?: unknown;
      headers?: Record<string, string>;
    }) => built.inject({ ...o, payload: o.payload as string, headers: { ...o.headers, authorization } }),
  };
  const created = await app.inject({
    method: 'POST',
    url: '/v1/agents',
    payload: { name: 'sh', provider: 'command' },
  });
  assert.equal(created.statusCode, 201);
  return { app, store };
}

test('a good message is accepted with its queue position', async () => {
  const { app, store } = await setup();
  const res = await app.inject({
    method: 'POST',
    url: '/v1/sessions/s1/messages',
    payload: { text: 'echo hi', agent: 'sh' },
  });
  assert.equal(res.statusCode, 202);
  assert.equal(res.json().session.queuePosition, 1);
  const view = await app.inject({ method: 'GET', url: '/v1/sessions/s1' });
  assert.equal(view.json().status, 'queued');
  await store.close();
});

test('bad input gets a 4xx naming the problem and stores nothing', async () => {
  const { app, store } = await setup();
  const json = { 'content-type': 'application/json' };
  const cases = [
    {
      name: 'unknown agent',
      url: '/v1/sessions/s1/messages',
      payload: JSON.stringify({ text: 'x', agent: 'ghost' }),
      status: 404,
      code: 'AGENT_NOT_FOUND',
      re: /ghost/,
    },
    {
      name: 'invalid JSON',
      url: '/v1/sessions/s1/messages',
      payload: '{"text": ',
      status: 400,
      code: 'INVALID_INPUT',
      re: /not valid JSON/,
    },
    {
      name: 'missing text',
      url: '/v1/sessions/s1/messages',
      payload: JSON.stringify({ agent: 'sh' }),
      status: 400,
      code: 'INVALID_INPUT',
      re: /text/,
    },
    {
      name: 'empty text',
      url: '/v1/sessions/s1/messages',
      payload: JSON.stringify({ text: '', agent: 'sh' }),
      status: 400,
      code: 'INVALID_INPUT',
      re: /empty/,
    },
    {
      name: 'unknown field',
      url: '/v1/sessions/s1/messages',
      payload: JSON.stringify({ text: 'x', agent: 'sh', priority: 1 }),
      status: 400,
      code: 'INVALID_INPUT',
      re: /priority/,
    },
    {
      name: 'no agent for a new session',
      url: '/v1/sessions/s1/messages',
      payload: JSON.stringify({ text: 'x' }),
      status: 400,
      code: 'AGENT_REQUIRED',
      re: /s1/,
    },
    {
      name: 'over the size limit',
      url: '/v1/sessions/s1/messages',
      payload: JSON.stringify({ text: 'x'.repeat(1025), agent: 'sh' }),
      status: 413,
      code: 'MESSAGE_TOO_LARGE',
      re: /1025 bytes.*1024/,
    },
    {
      name: 'far over the body limit',
      url: '/v1/sessions/s1/messages',
      payload: JSON.stringify({ text: 'x'.repeat(200_000), agent: 'sh' }),
      status: 413,
      code: 'MESSAGE_TOO_LARGE',
      re: /size limit/,
    },
    {
      name: 'session id with /',
      url: '/v1/sessions/a%2Fb/messages',
      payload: JSON.stringify({ text: 'x', agent: 'sh' }),
      status: 400,
      code: 'INVALID_SESSION_ID',
      re: /a\/b/,
    },
    {
      name: 'session id ..',
      url: '/v1/sessions/../messages',
      payload: JSON.stringify({ text: 'x', agent: 'sh' }),
      status: 404,
      code: 'NOT_FOUND',
      re: /No route/,
    },
    {
      name: 'session id with ..',
      url: '/v1/sessions/a..b/messages',
      payload: JSON.stringify({ text: 'x', agent: 'sh' }),
      status: 400,
      code: 'INVALID_SESSION_ID',
      re: /a\.\.b/,
    },
    {
      name: 'bad agent spec',
      url: '/v1/agents',
      payload: JSON.stringify({ name: 'x', provider: 'llm' }),
      status: 400,
      code: 'INVALID_INPUT',
      re: /provider/,
    },
  ];
  for (const c of cases) {
    const res = await app.inject({ method: 'POST', url: c.url, payload: c.payload, headers: json });
    assert.equal(res.statusCode, c.status, `${c.name}: ${res.body}`);
    const body = res.json();
    assert.equal(body.error.code, c.code, c.name);
    assert.match(body.error.message, c.re, c.name);
    assert.ok(body.error.hint.length > 0, c.name);
  }
  assert.deepEqual(await store.listSessionViews(Date.now()), []);
  assert.equal((await store.listAgents()).length, 1);
  const missing = await app.inject({ method: 'GET', url: '/v1/sessions/nope' });
  assert.equal(missing.statusCode, 404);
  assert.equal(missing.json().error.code, 'SESSION_NOT_FOUND');
  await store.close();
});
