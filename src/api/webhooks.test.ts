/**
 * Webhooks against real local receivers (node:http on loopback, real SQLite): signed
 * deliveries verified by the receiver; a receiver that is down gets retries, then a dead
 * letter, and nothing is lost: sent again once it is up, every event arrives.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { pino } from 'pino';
import { WebhookDispatcher } from '../channels/index.js';
import {
  loadConfig,
  systemClock,
  verifyWebhookSignature,
  WEBHOOK_SIGNATURE_HEADER,
  WEBHOOK_TIMESTAMP_HEADER,
  type WebhookPayload,
} from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';

interface Received {
  payload: WebhookPayload;
  signed: boolean;
}

/** A receiver that checks each signature with `secret()` and answers `status()`. */
function receiver(secret: () => string, status: () => number): { server: Server; got: Received[] } {
  const got: Received[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const signed = verifyWebhookSignature(
        secret(),
        String(req.headers[WEBHOOK_TIMESTAMP_HEADER]),
        body,
        String(req.headers[WEBHOOK_SIGNATURE_HEADER]),
      );
      const code = signed ? status() : 401;
      if (code === 200) got.push({ payload: JSON.parse(body) as WebhookPayload, signed });
      res.writeHead(code).end();
    });
  });
  return { server, got };
}

async function listen(server: Server, port = 0): Promise<number> {
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function setup(t: { after(fn: () => Promise<void>): void }) {
  const config = loadConfig({
    BERTH_WEBHOOK_MAX_ATTEMPTS: '3',
    BERTH_WEBHOOK_RETRY_BASE: '50ms',
    BERTH_WEBHOOK_TIMEOUT: '2s',
  });
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const log = pino({ level: 'silent' });
  const webhooks = new WebhookDispatcher({ store, clock: systemClock, config, log });
  webhooks.start();
  const app = await buildApp({ config, store, clock: systemClock, log, webhooks });
  t.after(async () => {
    await webhooks.stop();
    await app.close();
    await store.close();
  });
  const tokens = {
    acme: (await issueToken(store, 'acme', '', Date.now())).token,
    globex: (await issueToken(store, 'globex', '', Date.now())).token,
  };
  const call = async (who: keyof typeof tokens, method: 'GET' | 'POST', url: string, payload?: object) => {
    const res = await app.inject({
      method,
      url,
      payload,
      headers: { authorization: `Bearer ${tokens[who]}` },
    });
    return { status: res.statusCode, body: res.json() };
  };
  await call('acme', 'POST', '/v1/agents', { name: 'bot', provider: 'command' });
  return { store, call };
}

test('deliveries are signed, verified by the receiver, and logged as delivered', async (t) => {
  const { call, store } = await setup(t);
  let secret = '';
  const { server, got } = receiver(
    () => secret,
    () => 200,
  );
  const port = await listen(server);
  t.after(() => new Promise<void>((r) => server.close(() => r())));

  const created = await call('acme', 'POST', '/v1/webhooks', {
    url: `http://127.0.0.1:${port}/hook`,
    agent: 'bot',
    events: ['queued'],
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  secret = created.body.secret;
  for (const s of ['s1', 's2', 's1'])
    await call('acme', 'POST', `/v1/sessions/${s}/messages`, { text: 'x', agent: 'bot' });
  await until('3 deliveries', async () => (got.length === 3 ? true : undefined));
  assert.ok(got.every((r) => r.signed));
  assert.deepEqual(got.map((r) => r.payload.event.sessionId).sort(), ['s1', 's1', 's2']);
  assert.ok(got.every((r) => r.payload.event.type === 'queued'));

  const log = await until('log settled', async () => {
    const { body } = await call('acme', 'GET', `/v1/webhooks/${created.body.id}/deliveries`);
    return body.deliveries.every((d: { status: string }) => d.status === 'delivered')
      ? body.deliveries
      : undefined;
  });
  assert.equal(log.length, 3);
  assert.ok(
    log.every((d: { log: { statusCode: number }[] }) => d.log.length === 1 && d.log[0]!.statusCode === 200),
  );
  assert.deepEqual(await store.webhookDeliveryCounts(), { pending: 0, delivered: 3, dead: 0 });

  // Another tenant can neither hook onto the agent nor read the log.
  const theirs = await call('globex', 'POST', '/v1/webhooks', { url: 'http://127.0.0.1:1/', agent: 'bot' });
  assert.equal(theirs.status, 404);
  assert.equal((await call('globex', 'GET', `/v1/webhooks/${created.body.id}/deliveries`)).status, 404);
  const both = await call('acme', 'POST', '/v1/webhooks', {
    url: 'http://127.0.0.1:1/',
    agent: 'bot',
    session: 's1',
  });
  assert.equal(both.status, 400);
  assert.match(both.body.error.message, /exactly one of agent and session/);
  const badUrl = await call('acme', 'POST', '/v1/webhooks', { url: 'ftp://x', agent: 'bot' });
  assert.match(badUrl.body.error.message, /url/);
});

test('a receiver that is down: retries with backoff, a dead letter after N, nothing lost once it is back', async (t) => {
  const { call, store } = await setup(t);
  // A port with nothing listening: take one, then free it.
  const probe = createServer();
  const port = await listen(probe);
  await new Promise<void>((r) => probe.close(() => r()));

  const created = await call('acme', 'POST', '/v1/webhooks', {
    url: `http://127.0.0.1:${port}/hook`,
    session: 'd1',
    events: ['queued'],
  });
  // The session must exist first.
  assert.equal(created.status, 404);
  await call('acme', 'POST', '/v1/sessions/d1/messages', { text: 'first', agent: 'bot' });
  const hook = await call('acme', 'POST', '/v1/webhooks', {
    url: `http://127.0.0.1:${port}/hook`,
    session: 'd1',
    events: ['queued'],
  });
  assert.equal(hook.status, 201);
  for (let i = 0; i < 2; i++) await call('acme', 'POST', '/v1/sessions/d1/messages', { text: `m${i}` });
  await call('acme', 'POST', '/v1/sessions/other/messages', { text: 'not hooked', agent: 'bot' });

  const dead = await until('dead letters', async () => {
    const { body } = await call('acme', 'GET', `/v1/webhooks/${hook.body.id}/deliveries`);
    return body.deliveries.length === 2 &&
      body.deliveries.every((d: { status: string }) => d.status === 'dead')
      ? body.deliveries
      : undefined;
  });
  for (const d of dead) {
    assert.deepEqual(
      d.log.map((a: { attempt: number }) => a.attempt),
      [1, 2, 3],
      'three attempts each',
    );
    assert.ok(
      d.log.every((a: { statusCode: number | null; error: string }) => a.statusCode === null && a.error),
    );
    assert.ok(d.log[2].at - d.log[0].at >= 50 + 100, 'backoff between attempts');
  }
  assert.deepEqual(await store.webhookDeliveryCounts(), { pending: 0, delivered: 0, dead: 2 });

  // The receiver comes up on that port; the dead letters are sent again and all arrive.
  const { server, got } = receiver(
    () => hook.body.secret,
    () => 200,
  );
  await listen(server, port);
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  for (const d of dead) {
    const retried = await call('acme', 'POST', `/v1/webhooks/${hook.body.id}/deliveries/${d.id}/retry`);
    assert.equal(retried.status, 202);
  }
  await until('all delivered', async () => (got.length === 2 ? true : undefined));
  const sessionEvents = (await store.eventsAfter('d1', 0, 100)).filter((e) => e.type === 'queued').slice(1);
  assert.deepEqual(
    got.map((r) => r.payload.event.id).sort(),
    sessionEvents.map((e) => e.id),
    'every event after the webhook was created arrived',
  );
  const missing = await call('acme', 'POST', `/v1/webhooks/${hook.body.id}/deliveries/999/retry`);
  assert.equal(missing.status, 404);
});
