/**
 * SSE over real HTTP (app.listen on a free port, real SQLite): resume with Last-Event-ID,
 * the per-tenant stream, and clients that go away leave no store listener behind (the
 * streams share the change feed's one).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { ApiClient, type StreamedEvent } from '../client/index.js';
import { loadConfig, systemClock } from '../core/index.js';
import { openSqliteStore, type Store } from '../store/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';

/** The store, with a count of live onChange listeners: what an SSE stream holds while open. */
function countingListeners(store: Store): { store: Store; live: () => number } {
  let live = 0;
  const onChange: Store['onChange'] = (listener) => {
    live++;
    const off = store.onChange(listener);
    return () => {
      live--;
      off();
    };
  };
  return { store: Object.assign(Object.create(store) as Store, { onChange }), live: () => live };
}

type TestContext = { after(fn: () => Promise<void>): void };

/** An in-memory store and the API on `wrap(store)`, both closed after the test: the store, the API's URL. */
async function serve(t: TestContext, wrap: (raw: Store) => Store = (raw) => raw) {
  const config = loadConfig({});
  const raw = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const app = await buildApp({
    config,
    store: wrap(raw),
    clock: systemClock,
    log: pino({ level: 'silent' }),
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(async () => {
    await app.close();
    await raw.close();
  });
  return { raw, url };
}

async function setup(t: TestContext) {
  let live = () => 0;
  const { raw, url } = await serve(t, (raw) => {
    const counting = countingListeners(raw);
    live = counting.live;
    return counting.store;
  });
  const acmeToken = (await issueToken(raw, 'acme', '', Date.now())).token;
  const acme = new ApiClient(url, acmeToken);
  const globex = new ApiClient(url, (await issueToken(raw, 'globex', '', Date.now())).token);
  await acme.request('POST', '/v1/agents', { name: 'a', provider: 'command' });
  await globex.request('POST', '/v1/agents', { name: 'g', provider: 'command' });
  return { url, live, acme, acmeToken, globex };
}

async function take(stream: AsyncGenerator<StreamedEvent>, n: number): Promise<StreamedEvent[]> {
  const out: StreamedEvent[] = [];
  for await (const e of stream) {
    if (e.id === null) continue;
    out.push(e);
    if (out.length === n) break;
  }
  return out;
}

test('a session stream resumes after Last-Event-ID with nothing lost or repeated', async (t) => {
  const { url, acme, acmeToken } = await setup(t);
  for (let i = 0; i < 3; i++)
    await acme.request('POST', '/v1/sessions/s1/messages', { text: `m${i}`, agent: 'a' });
  const first = await take(acme.events('s1', 0), 2);
  assert.deepEqual(
    first.map((e) => e.type),
    ['queued', 'queued'],
  );
  // The raw header, as a browser's EventSource sends it on reconnect.
  const res = await fetch(`${url}/v1/sessions/s1/events`, {
    headers: { 'last-event-id': String(first[1]!.id), authorization: `Bearer ${acmeToken}` },
    signal: AbortSignal.timeout(10_000),
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  let text = '';
  while (!text.includes('data: ')) text += new TextDecoder().decode((await reader.read()).value);
  await reader.cancel();
  const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  assert.deepEqual(ids, [first[1]!.id! + 1], 'the stream picks up right after the last id it was given');
  const later = await acme.request<{ eventId: number }>('POST', '/v1/sessions/s1/messages', { text: 'm3' });
  const resumed = await take(acme.events('s1', first[1]!.id!), 2);
  assert.deepEqual(
    resumed.map((e) => e.id),
    [first[1]!.id! + 1, later.eventId],
  );
});

test("the tenant stream carries every session of the tenant and nothing of another's", async (t) => {
  const { acme, globex } = await setup(t);
  await globex.request('POST', '/v1/sessions/g1/messages', { text: 'x', agent: 'g' });
  await acme.request('POST', '/v1/sessions/a1/messages', { text: 'x', agent: 'a' });
  await acme.request('POST', '/v1/sessions/a2/messages', { text: 'x', agent: 'a' });
  const seen = await take(acme.stream('/v1/events', 0), 2);
  assert.deepEqual(
    seen.map((e) => e.data.sessionId),
    ['a1', 'a2'],
  );
  const theirs = await take(globex.stream('/v1/events', 0), 1);
  assert.equal(theirs[0]!.data.sessionId, 'g1');
});

test('clients that disconnect leave no listener behind', async (t) => {
  const { acme, live } = await setup(t);
  await acme.request('POST', '/v1/sessions/s1/messages', { text: 'x', agent: 'a' });
  const cuts = Array.from({ length: 5 }, () => new AbortController());
  const streams = cuts.map((c, i) =>
    (i % 2 ? acme.stream('/v1/events', 0, c.signal) : acme.events('s1', 0, c.signal)).next(),
  );
  await Promise.all(streams);
  assert.equal(live(), 1, "one store listener, the change feed's, for every open stream");
  for (const c of cuts) c.abort();
  const deadline = Date.now() + 10_000;
  while (live() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(live(), 0, 'every listener went with its client');
});

test("a session stream reads the store on its own session's changes, not on every other session's", async (t) => {
  let reads = 0;
  const { raw, url } = await serve(t, (raw) => {
    const eventsAfter: Store['eventsAfter'] = (sessionId, ...rest) => {
      if (sessionId === 's1') reads++;
      return raw.eventsAfter(sessionId, ...rest);
    };
    return Object.assign(Object.create(raw) as Store, { eventsAfter });
  });
  const client = new ApiClient(url, (await issueToken(raw, 'acme', '', Date.now())).token);
  await client.request('POST', '/v1/agents', { name: 'a', provider: 'command' });
  await client.request('POST', '/v1/sessions/s1/messages', { text: 'own', agent: 'a' });
  const stream = client.events('s1', 0);
  // next() by hand: a for-await that breaks would close the stream.
  const nextWithId = async () => {
    for (;;) {
      const { value, done } = await stream.next();
      if (done || value.id !== null) return value;
    }
  };
  await nextWithId();
  const before = reads;
  const startedAt = Date.now();
  for (let i = 0; i < 40; i++)
    await client.request('POST', `/v1/sessions/s2/messages`, { text: `m${i}`, agent: 'a' });
  // One read per tick (1 s) at most, whatever the other session did: 40 changes would be 40 reads.
  const ticks = Math.ceil((Date.now() - startedAt) / 1000) + 1;
  assert.ok(reads - before <= ticks, `${reads - before} reads for ${ticks} ticks`);
  await client.request('POST', '/v1/sessions/s1/messages', { text: 'own again' });
  const own = await nextWithId();
  assert.equal(own?.type, 'queued', "its own session's change still arrives");
  await stream.return(undefined);
});

test('a session stream sends its queue position when the session ahead of it is claimed', async (t) => {
  const { raw: store, url } = await serve(t);
  const client = new ApiClient(url, (await issueToken(store, 'acme', '', Date.now())).token);
  await client.request('POST', '/v1/agents', { name: 'a', provider: 'command' });
  await client.request('POST', '/v1/sessions/first/messages', { text: 'x', agent: 'a' });
  await client.request('POST', '/v1/sessions/second/messages', { text: 'x', agent: 'a' });
  const now = Date.now();
  await store.registerWorker({ id: 'w', host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
  const positions: unknown[] = [];
  for await (const e of client.events('second', 0, AbortSignal.timeout(30_000))) {
    if (e.type !== 'queued') continue;
    positions.push(e.data.position);
    if (positions.length === 1)
      assert.equal((await store.claimRunnableSession('w', now))?.session.id, 'first');
    if (e.id === null) break;
  }
  assert.deepEqual(positions, [2, 1], 'its stored queued event, then the moved position');
});
