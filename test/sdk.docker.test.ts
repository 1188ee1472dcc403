/** The SDK against a real host (real Docker, SQLite, HTTP): create an agent, send and get the reply, iterate events. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Berth } from '../src/client/index.js';
import { isBerthError } from '../src/core/index.js';
import { startTestHost } from './helpers/test-host.js';

test('Berth SDK: agents.create, sessions.send → reply, sessions.events as an async iterator, typed errors', async (t) => {
  const { host } = await startTestHost(t);
  const admin = new Berth({ url: host.url, token: host.adminToken });
  const { token } = await admin.tokens.create({ tenant: 'sdk', label: 'test' });
  const berth = new Berth({ url: host.url, token });

  const agent = await berth.agents.create({ name: 'sdk-sh', provider: 'command' });
  assert.equal(agent.tenant, 'sdk');
  const seen: string[] = [];
  const reply = await berth.sessions.send('sdk1', 'echo hello from the sdk', {
    agent: 'sdk-sh',
    onEvent: (e) => seen.push(e.type),
  });
  assert.equal(reply.text, 'hello from the sdk\n');
  assert.ok(seen.includes('started') && seen.includes('reply'), seen.join());

  const types: string[] = [];
  for await (const e of berth.sessions.events('sdk1', { signal: AbortSignal.timeout(30_000) })) {
    types.push(e.type);
    if (e.type === 'reply') break;
  }
  assert.deepEqual(types.slice(0, 2), ['queued', 'started']);
  const view = await berth.sessions.get('sdk1');
  assert.equal(view.lastReply?.text, 'hello from the sdk\n');
  assert.equal((await berth.sessions.turns('sdk1'))[0]?.status, 'committed');

  const stranger = new Berth({
    url: host.url,
    token: (await admin.tokens.create({ tenant: 'other' })).token,
  });
  await assert.rejects(stranger.sessions.get('sdk1'), (err) => isBerthError(err, 'SESSION_NOT_FOUND'));
  await assert.rejects(
    new Berth({ url: host.url }).agents.list(),
    (err) => isBerthError(err, 'API_TOKEN_INVALID') && /berth token create/.test(err.hint),
  );
});
