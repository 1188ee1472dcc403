/**
 * The change feed on PostgreSQL, where ids are allocated at insert and transactions commit
 * in another order: an event whose transaction commits after one holding a higher id is
 * still delivered (the tenant stream in id order, held behind the gap; the other session's
 * stream at once), and an id whose transaction rolled back holds nothing for longer than
 * the feed's gap wait. Built with two plain pg connections, each its own transaction. And
 * streams that reconnect during a burst that two other stores write concurrently (other
 * processes, as far as the API's store can tell) get every event once, in order.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { pino } from 'pino';
import { issueToken } from '../src/api/api-tokens.js';
import { buildApp } from '../src/api/index.js';
import { ApiClient, type StreamedEvent } from '../src/client/index.js';
import { loadConfig, sleep, systemClock } from '../src/core/index.js';
import { openPostgresStore } from '../src/store/index.js';
import { freshDatabase } from './helpers/postgres.js';
import { assertEveryEventOnce, followWithReconnects } from './helpers/sse-follow.js';
import { LEASE_MS, RETRY } from './store/conformance.js';

const GAP_WAIT_MS = 1_500;

/** Collects a stream's stored events (id-less ones left out) until the test ends. */
function collect(stream: AsyncGenerator<StreamedEvent>): StreamedEvent[] {
  const got: StreamedEvent[] = [];
  void (async () => {
    try {
      for await (const e of stream) if (e.id !== null) got.push(e);
    } catch {
      // aborted at the end
    }
  })();
  return got;
}

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** The API on a fresh database with sessions s1 and s2 (one event each), and two plain connections that insert events. */
async function setup(t: { after(fn: () => Promise<void>): void }) {
  const url = await freshDatabase();
  const store = await openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY });
  const config = loadConfig({});
  const app = await buildApp({
    config,
    store,
    clock: systemClock,
    log: pino({ level: 'silent' }),
    streams: { feed: { tickMs: 200, gapWaitMs: GAP_WAIT_MS } },
  });
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const c1 = new pg.Client({ connectionString: url });
  const c2 = new pg.Client({ connectionString: url });
  await Promise.all([c1.connect(), c2.connect()]);
  const cut = new AbortController();
  t.after(async () => {
    cut.abort();
    await Promise.all([c1.end(), c2.end()]);
    await app.close();
    await store.close();
  });
  const client = new ApiClient(base, (await issueToken(store, 'acme', '', Date.now())).token);
  await client.request('POST', '/v1/agents', { name: 'a', provider: 'command' });
  await client.request('POST', '/v1/sessions/s1/messages', { text: 'x', agent: 'a' });
  await client.request('POST', '/v1/sessions/s2/messages', { text: 'x', agent: 'a' });
  const insert = async (c: pg.Client, sessionId: string, text: string) =>
    Number(
      (
        await c.query(
          `INSERT INTO events (session_id, type, data, created_at) VALUES ($1, 'progress', $2, $3) RETURNING id`,
          [sessionId, JSON.stringify({ turnId: 't', text }), Date.now()],
        )
      ).rows[0].id,
    );
  return { client, c1, c2, cut, insert };
}

test('postgres: an event committed after a higher id is delivered; a rolled-back id holds nothing for long', async (t) => {
  const { client, c1, c2, cut, insert } = await setup(t);
  const tenant = collect(client.stream('/v1/events', 0, cut.signal));
  const s2 = collect(client.events('s2', 0, cut.signal));
  await until('the streams to catch up', () => tenant.length === 2 && s2.length === 1);

  // Id `low` allocated first, committed last.
  await c1.query('BEGIN');
  const low = await insert(c1, 's1', 'low');
  await c2.query('BEGIN');
  const high = await insert(c2, 's2', 'high');
  await c2.query('COMMIT');
  assert.ok(high > low);
  await until("s2's stream to get the higher id", () => s2.some((e) => e.id === high));
  await sleep(600); // a few of the feed's reads, each finding `low` missing
  assert.ok(!tenant.some((e) => e.id === high), 'the tenant stream holds the higher id behind the gap');
  await c1.query('COMMIT');
  await until('the tenant stream to get both', () => tenant.some((e) => e.id === high));
  assert.deepEqual(
    tenant.slice(-2).map((e) => e.id),
    [low, high],
    'the late commit delivered, in id order',
  );

  // An id whose transaction rolls back: the next event waits for it at most the gap wait.
  await c1.query('BEGIN');
  const lost = await insert(c1, 's1', 'rolled back');
  await c1.query('ROLLBACK');
  const next = await insert(c2, 's1', 'after the rollback');
  assert.ok(next > lost);
  const committedAt = Date.now();
  await until('the event after the rolled-back id', () => tenant.some((e) => e.id === next), GAP_WAIT_MS * 4);
  t.diagnostic(`delivered ${Date.now() - committedAt} ms after its commit (gap wait ${GAP_WAIT_MS} ms)`);

  const ids = tenant.map((e) => e.id!);
  assert.deepEqual(
    ids,
    [...new Set(ids)].sort((a, b) => a - b),
    'each event once, in id order',
  );
  assert.ok(!ids.includes(lost));
  const s2ids = s2.map((e) => e.id!);
  assert.deepEqual(s2ids, [...new Set(s2ids)], "s2's events once");
});

test('postgres: a transaction in flight when the feed starts, below the newest id, is delivered', async (t) => {
  const { client, c1, c2, cut, insert } = await setup(t);
  await c1.query('BEGIN');
  const low = await insert(c1, 's1', 'in flight');
  const high = await insert(c2, 's2', 'committed');
  // The first streams start the feed now: the newest committed id is `high`.
  const tenant = collect(client.stream('/v1/events', 0, cut.signal));
  const s1 = collect(client.events('s1', 0, cut.signal));
  await until('the streams to catch up', () => tenant.length === 2 && s1.length === 1);
  await sleep(600);
  await c1.query('COMMIT');
  await until(
    'the late event on both streams',
    () => s1.some((e) => e.id === low) && tenant.some((e) => e.id === high),
  );
  assert.deepEqual(
    tenant.slice(-2).map((e) => e.id),
    [low, high],
  );
});

test('postgres: streams that reconnect during a concurrent burst from two other stores get every event once, in order', async (t) => {
  const url = await freshDatabase();
  const open = () => openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY });
  const [store, w1, w2] = [await open(), await open(), await open()];
  const app = await buildApp({
    config: loadConfig({}),
    store,
    clock: systemClock,
    log: pino({ level: 'silent' }),
    streams: { feed: { tickMs: 200 } },
  });
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(async () => {
    await app.close();
    await Promise.all([store.close(), w1.close(), w2.close()]);
  });
  const client = new ApiClient(base, (await issueToken(store, 'acme', '', Date.now())).token);
  await client.request('POST', '/v1/agents', { name: 'a', provider: 'command' });
  const SESSIONS = 6;
  const MESSAGES = 240;
  for (let i = 0; i < SESSIONS; i++)
    await client.request('POST', '/v1/sessions', { id: `s${i}`, agent: 'a' });
  // Eight writers at once on two stores: their transactions commit in any order.
  const burst = Promise.all(
    Array.from({ length: 8 }, async (_, writer) => {
      for (let i = writer; i < MESSAGES; i += 8)
        await (writer % 2 ? w1 : w2).enqueueMessage({
          sessionId: `s${i % SESSIONS}`,
          agent: 'a',
          text: `m${i}`,
          now: Date.now(),
          tenant: 'acme',
        });
    }),
  );
  const [tenant, session] = await Promise.all([
    followWithReconnects(
      (after, signal) => client.stream('/v1/events', after, signal),
      23,
      (got) => got.length >= MESSAGES,
    ),
    followWithReconnects(
      (after, signal) => client.events('s0', after, signal),
      5,
      (got) => got.length >= MESSAGES / SESSIONS,
    ),
    burst,
  ]);
  const stored = await store.eventsAfter(null, 0, 10_000, 'acme');
  assert.equal(stored.length, MESSAGES);
  assertEveryEventOnce(stored, tenant.got, { id: 's0', got: session.got });
  t.diagnostic(`${tenant.reconnects} and ${session.reconnects} reconnects`);
});
