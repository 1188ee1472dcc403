/** /metrics: Prometheus text with the gauges read from the store and the histograms derived from events. Real SQLite. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { agentSpecSchema, loadConfig } from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';
import { BerthMetrics, timeStoreCalls } from './metrics.js';

const BASE = 1_700_000_000_000;

function sample(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

test('metrics: queue depth, warm pool, turns, latency histograms, retries, store call latency; admin only', async () => {
  const config = loadConfig({});
  let now = BASE;
  const clock = { now: () => now };
  const raw = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const metrics = new BerthMetrics({ store: raw, clock, warmPoolSize: () => 3 });
  const store = timeStoreCalls(raw, metrics.storeCallSeconds);
  const app = await buildApp({ config, store, clock, log: pino({ level: 'silent' }), metrics });
  const admin = (await issueToken(raw, null, 'admin', now)).token;
  const tenant = (await issueToken(raw, 'acme', '', now)).token;
  const scrape = async (token: string) =>
    app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${token}` } });

  // The event-derived metrics count from the first scrape on.
  assert.equal(sample((await scrape(admin)).body, 'berth_turns_started_total'), 0);
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), now);
  for (const s of ['a', 'b']) await store.enqueueMessage({ sessionId: s, agent: 'sh', text: 'x', now });
  let text = (await scrape(admin)).body;
  assert.equal(sample(text, 'berth_queue_depth'), 2);
  assert.equal(sample(text, 'berth_warm_pool_size'), 3);
  assert.equal(sample(text, 'berth_sessions{status="waiting"}'), 2);
  assert.equal(sample(text, 'berth_inbound_messages{status="pending"}'), 2);

  // One turn: waits 2 s in the queue, runs 3 s, commits.
  await store.registerWorker({ id: 'w1', host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
  now += 2_000;
  const claimed = (await store.claimRunnableSession('w1', now))!;
  const fence = { sessionId: claimed.session.id, generation: claimed.session.generation, workerId: 'w1' };
  const started = await store.startTurn(fence, now);
  assert.equal(started.code, 'ok');
  const turn = started.code === 'ok' ? started.value!.turn : null;
  now += 3_000;
  assert.equal(
    await store.commitTurn({ ...fence, turnId: turn!.id, outputs: [{ text: 'done' }] }, now),
    'ok',
  );
  // The other: started, then aborted (a retry).
  const second = (await store.claimRunnableSession('w1', now))!;
  const fence2 = { sessionId: second.session.id, generation: second.session.generation, workerId: 'w1' };
  const turn2 = await store.startTurn(fence2, now);
  await store.abortTurn(
    {
      ...fence2,
      turnId: turn2.code === 'ok' ? turn2.value!.turn.id : '',
      code: 'SANDBOX_EXITED',
      error: 'killed',
      detectedAfterMs: 40,
    },
    now,
  );

  text = (await scrape(admin)).body;
  assert.equal(sample(text, 'berth_turns_started_total'), 2);
  assert.equal(sample(text, 'berth_turn_duration_seconds_count'), 1);
  assert.equal(sample(text, 'berth_turn_duration_seconds_sum'), 3);
  assert.equal(sample(text, 'berth_queue_wait_seconds_sum'), 2 + 5, 'a waited 2 s, b 5 s');
  assert.equal(sample(text, 'berth_retries_total'), 1);
  assert.equal(sample(text, 'berth_detection_seconds_count'), 1);
  assert.equal(sample(text, 'berth_detection_seconds_sum'), 0.04);
  assert.equal(sample(text, 'berth_failed_messages_total'), 0);
  assert.equal(sample(text, 'berth_store_call_seconds_count{method="commitTurn"}'), 1);
  assert.equal(sample(text, 'berth_webhook_deliveries{status="dead"}'), 0);
  // A second scrape does not count the same events twice.
  assert.equal(sample((await scrape(admin)).body, 'berth_turns_started_total'), 2);

  const denied = await scrape(tenant);
  assert.equal(denied.statusCode, 403);
  assert.equal(denied.json().error.code, 'ADMIN_ONLY');
  await app.close();
  await raw.close();
});
