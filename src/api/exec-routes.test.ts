/** POST /v1/sessions/:id/exec and the sandbox's files before they reach a worker (app.inject, real SQLite): the input, and each way there is no live sandbox to reach. */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { pino } from 'pino';
import { agentSpecSchema, loadConfig, systemClock } from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test('exec: bad input names the fix; no sandbox bound is NO_LIVE_SANDBOX; a stale or silent worker is SANDBOX_UNREACHABLE', async (t) => {
  const config = loadConfig({});
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const app = await buildApp({ config, store, clock: systemClock, log: pino({ level: 'silent' }) });
  t.after(() => store.close());
  const exec = async (body: object) => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/sessions/r1/exec',
      payload: body,
      headers: { authorization: `Bearer ${token}` },
    });
    return { status: res.statusCode, error: res.json().error as { code: string; message: string } };
  };
  /** A file route of the same session: its code. */
  const files = async (method: 'GET' | 'PUT' | 'POST', route: string, payload?: string | object) => {
    const res = await app.inject({
      method,
      url: `/v1/sessions/r1/sandbox/files${route}`,
      headers: { authorization: `Bearer ${token}` },
      ...(payload === undefined ? {} : { payload }),
    });
    return [res.statusCode, (res.json().error as { code: string }).code];
  };
  const now = Date.now();
  const { token } = await issueToken(store, 'acme', '', now);
  const spec = agentSpecSchema.parse({ name: 'res', provider: 'command', mode: 'resident' });
  await store.createAgent(spec, now, 'acme');
  await store.enqueueMessage({ sessionId: 'r1', agent: 'res', text: 'true', now, tenant: 'acme' });

  const bad = await exec({ command: 'ls', cwd: '../etc' });
  assert.deepEqual([bad.status, bad.error.code], [400, 'INVALID_INPUT']);
  assert.match(bad.error.message, /no "\.\." segments/);
  const idle = await exec({ command: 'ls' });
  assert.deepEqual([idle.status, idle.error.code], [409, 'NO_LIVE_SANDBOX']);
  assert.deepEqual(await files('GET', '/content?path=..%2Fx'), [400, 'PATH_OUTSIDE_WORKSPACE']);
  assert.deepEqual(await files('POST', '/rename', { from: 'a', to: '/etc/passwd' }), [
    400,
    'PATH_OUTSIDE_WORKSPACE',
  ]);
  assert.deepEqual(await files('GET', '/stat?path=%2Fworkspace%2F%FF'), [400, 'PATH_OUTSIDE_WORKSPACE']);
  assert.deepEqual(await files('GET', '?path=src'), [409, 'NO_LIVE_SANDBOX']);

  const control = { url: `http://127.0.0.1:${await closedPort()}`, key: 'k'.repeat(64) };
  await store.registerWorker({
    id: 'w1',
    host: 'h',
    pid: 1,
    slots: 1,
    heartbeatAt: now,
    startedAt: now,
    control,
  });
  const claim = await store.claimRunnableSession('w1', now);
  await store.recordSandbox(
    { sessionId: 'r1', generation: claim!.session.generation, workerId: 'w1' },
    'sb',
    now,
  );
  const silent = await exec({ command: 'ls' });
  assert.deepEqual([silent.status, silent.error.code], [503, 'SANDBOX_UNREACHABLE']);
  assert.match(silent.error.message, /did not answer/);
  assert.deepEqual(await files('PUT', '/content?path=a.txt', 'bytes'), [503, 'SANDBOX_UNREACHABLE']);
  await store.renewWorker('w1', now - config.leaseMs - 1);
  const stale = await exec({ command: 'ls' });
  assert.deepEqual([stale.status, stale.error.code], [503, 'SANDBOX_UNREACHABLE']);
  assert.match(stale.error.message, /has not renewed its row for a lease/);
});
