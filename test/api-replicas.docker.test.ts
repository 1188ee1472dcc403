/**
 * Several API processes behind a load balancer, as docs/scale-out.md deploys them: two
 * `berth up --slots 0` behind Debian's HAProxy (round robin, no sticky sessions) and one
 * worker, on one store. Either API accepts a message; webhooks are delivered once however
 * many processes dispatch; an API process SIGKILLed under open event streams costs their
 * clients a reconnect through the balancer (from Last-Event-ID) and nothing else: every
 * event once, in order, against the store's own log.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ApiClient, Berth, type StreamedEvent } from '../src/client/index.js';
import { WEBHOOK_DELIVERY_HEADER } from '../src/core/index.js';
import { readAdminToken } from '../src/secrets/index.js';
import { openStore } from '../src/store/index.js';
import { berth, eventually, exited, freePort, spawnBerth, waitForHealthy } from './helpers/processes.js';
import { followWithReconnects } from './helpers/sse-follow.js';

const haproxyMissing =
  spawnSync('haproxy', ['-v']).status === 0
    ? false
    : 'needs haproxy (Debian package; scripts/ensure-haproxy.sh, run by `make setup`)';

/** Round robin over the two APIs, each checked every 200 ms; SSE needs the long timeouts. */
function haproxyConfig(listen: number, apis: number[]): string {
  return [
    'defaults',
    '  mode http',
    '  timeout connect 1s',
    '  timeout client 5m',
    '  timeout server 5m',
    '  retries 3',
    '  option redispatch',
    'frontend berth',
    `  bind 127.0.0.1:${listen}`,
    '  default_backend apis',
    'backend apis',
    '  balance roundrobin',
    '  option httpchk GET /healthz',
    ...apis.map((port, i) => `  server api${i} 127.0.0.1:${port} check inter 200 fall 1 rise 1`),
    '',
  ].join('\n');
}

test('two API processes behind HAProxy: either accepts a message, a webhook is delivered once, one SIGKILLed under open streams costs a reconnect and no event', {
  skip: haproxyMissing,
  timeout: 240_000,
}, async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-replicas-'));
  const children: ChildProcess[] = [];
  t.after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    await Promise.all(children.map(exited));
    await rm(dataDir, { recursive: true, force: true });
  });
  const env = { ...process.env, BERTH_DATA: dataDir, BERTH_LOG_LEVEL: 'warn' };
  const start = async (name: string, slots: number) => {
    const port = await freePort();
    const child = spawnBerth(
      ['up', '--slots', String(slots)],
      { ...env, BERTH_PORT: String(port) },
      dataDir,
      `${name}.log`,
    );
    children.push(child);
    await waitForHealthy(`http://127.0.0.1:${port}`, child, join(dataDir, `${name}.log`));
    return { child, port, url: `http://127.0.0.1:${port}` };
  };
  // The worker first: it makes the store and the admin token the APIs share.
  await start('worker', 2);
  const [a, b] = [await start('api-a', 0), await start('api-b', 0)];
  const listen = await freePort();
  await writeFile(join(dataDir, 'haproxy.cfg'), haproxyConfig(listen, [a.port, b.port]));
  const balancer = spawn('haproxy', ['-db', '-f', join(dataDir, 'haproxy.cfg')], { stdio: 'ignore' });
  children.push(balancer);
  const url = `http://127.0.0.1:${listen}`;
  await eventually('the balancer up', () =>
    fetch(`${url}/healthz`).then(
      (r) => (r.ok ? true : undefined),
      () => undefined,
    ),
  );

  const token = (await readAdminToken(dataDir)) ?? undefined;
  const sdk = new Berth({ url, token });
  const created = await berth(['agent', 'create', 'sh', '--provider', 'command'], { ...env, BERTH_URL: url });
  assert.equal(created.code, 0, created.stderr);

  // Webhook deliveries: three processes dispatch (both APIs and the worker's host).
  const deliveries: string[] = [];
  const receiver = createServer((req, res) => {
    deliveries.push(String(req.headers[WEBHOOK_DELIVERY_HEADER]));
    req.resume().on('end', () => res.end());
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => receiver.close(() => r())));
  await sdk.webhooks.create({
    url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
    agent: 'sh',
    events: ['reply'],
  });

  // Either API accepts a message: one straight to each, the rest through the balancer.
  const post = (base: string, text: string) =>
    new Berth({ url: base, token }).sessions.post('s1', { text, agent: 'sh' });
  await post(a.url, 'echo via-a');
  await post(b.url, 'echo via-b');
  for (let i = 0; i < 4; i++) await post(url, `echo lb-${i}`);
  await eventually('six webhook deliveries', async () => (deliveries.length >= 6 ? true : undefined), 60_000);
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(new Set(deliveries).size, 6, `each reply delivered once: ${deliveries.join(', ')}`);
  assert.equal(deliveries.length, 6, 'and none twice');

  // Four streams through the balancer (two on each API), then API a is SIGKILLed mid-burst.
  const replies = 16;
  const client = new ApiClient(url, token);
  const enough = (got: StreamedEvent[]) => got.filter((e) => e.type === 'reply').length >= replies;
  const streams = Array.from({ length: 4 }, () =>
    followWithReconnects(
      (after, signal) => client.events('s1', after, signal),
      Number.POSITIVE_INFINITY,
      enough,
      {
        resumeAfterBreak: true,
        timeoutMs: 90_000,
      },
    ),
  );
  for (let i = 0; i < 10; i++) {
    await post(url, `echo burst-${i}`);
    if (i === 4) {
      a.child.kill('SIGKILL');
      await exited(a.child);
    }
  }
  const followed = await Promise.all(streams);

  const store = await openStore({
    store: '',
    sqlitePath: join(dataDir, 'berth.db'),
    leaseMs: 2000,
    retry: { retryBaseMs: 500, retryMaxMs: 5000, maxTries: 5 },
  });
  t.after(() => store.close());
  const stored = (await store.eventsAfter('s1', 0, 10_000)).map((e) => e.id);
  for (const [i, f] of followed.entries()) {
    const ids = f.got.map((e) => e.id);
    assert.deepEqual(ids, stored.slice(0, ids.length), `stream ${i}: every stored event once, in order`);
    assert.equal(f.got.filter((e) => e.type === 'reply').length, replies, `stream ${i}: every reply`);
  }
  assert.ok(
    followed.some((f) => f.broken > 0),
    `a stream on the killed API reconnected (broken: ${followed.map((f) => f.broken).join(', ')})`,
  );
  const messages = (await sdk.sessions.messages('s1', { limit: 100 })).messages;
  assert.equal(messages.filter((m) => m.direction === 'in').length, replies, 'every message accepted once');
});
