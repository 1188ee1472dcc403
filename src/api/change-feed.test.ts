/**
 * The change feed behind the SSE routes, over real HTTP and real SQLite files: a stream
 * that reconnects during a burst written through another store connection gets every
 * event once and in order; the API's store reads do not grow with the number of open
 * streams (a count over the same workload with 1 and 200 streams); a client that does not
 * read is cut off with an `overflow` event and resumes from the id it names.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { countingStreamReads } from '../../test/helpers/counting-store.js';
import { assertEveryEventOnce, followWithReconnects } from '../../test/helpers/sse-follow.js';
import { ApiClient, parseSseBlock, type StreamedEvent } from '../client/index.js';
import { loadConfig, sleep, systemClock } from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';
import type { ApiDeps } from './deps.js';

type TestContext = { after(fn: () => Promise<void>): void };

/** An API on a SQLite file (its own store connection) and a writer on a second connection to the same file. */
async function serve(t: TestContext, streams?: ApiDeps['streams']) {
  const dir = await mkdtemp(join(tmpdir(), 'berth-feed-'));
  const config = loadConfig({});
  const open = () => openSqliteStore({ path: join(dir, 'berth.db'), leaseMs: config.leaseMs, retry: config });
  const api = open();
  const writer = open();
  const count = countingStreamReads(api);
  const app = await buildApp({
    config,
    store: count.store,
    clock: systemClock,
    log: pino({ level: 'silent' }),
    streams,
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(async () => {
    await app.close();
    await api.close();
    await writer.close();
    await rm(dir, { recursive: true, force: true });
  });
  const token = (await issueToken(api, 'acme', '', Date.now())).token;
  const client = new ApiClient(url, token);
  await client.request('POST', '/v1/agents', { name: 'a', provider: 'command' });
  return { url, token, client, writer, api, reads: count.reads };
}

test('a stream that reconnects during a burst from another store connection gets every event once, in order', async (t) => {
  const { client, writer, api } = await serve(t, { feed: { tickMs: 200 } });
  const SESSIONS = 5;
  const MESSAGES = 300;
  for (let i = 0; i < SESSIONS; i++)
    await client.request('POST', '/v1/sessions', { id: `s${i}`, agent: 'a' });
  let written = 0;
  const burst = (async () => {
    for (let i = 0; i < MESSAGES; i++) {
      await writer.enqueueMessage({
        sessionId: `s${i % SESSIONS}`,
        agent: 'a',
        text: `m${i}`,
        now: Date.now(),
        tenant: 'acme',
      });
      written++;
      // Let the API serve its streams while this connection writes.
      if (i % 10 === 0) await sleep(5);
    }
  })();
  const tenant = followWithReconnects(
    (after, signal) => client.stream('/v1/events', after, signal),
    37,
    (got) => got.length >= MESSAGES,
  );
  const session = followWithReconnects(
    (after, signal) => client.events('s0', after, signal),
    7,
    (got) => got.length >= MESSAGES / SESSIONS,
  );
  await burst;
  const [all, one] = await Promise.all([tenant, session]);
  assert.equal(written, MESSAGES);
  const stored = await api.eventsAfter(null, 0, 10_000, 'acme');
  assert.equal(stored.length, MESSAGES);
  assertEveryEventOnce(stored, all.got, { id: 's0', got: one.got });
  assert.ok(all.reconnects >= 8 && one.reconnects >= 8, `${all.reconnects} and ${one.reconnects} reconnects`);
});

test("the API's store reads do not grow with the number of open streams", async (t) => {
  const SESSIONS = 10;
  const WRITES = 30;
  /** Store reads of the API while `streams` streams follow the same writes for the same time. */
  const readsWith = async (streams: number): Promise<number> => {
    const { client, writer, reads } = await serve(t);
    for (let i = 0; i < SESSIONS; i++)
      await client.request('POST', `/v1/sessions/s${i}/messages`, { text: 'first', agent: 'a' });
    const cut = new AbortController();
    const opened = Array.from({ length: streams }, (_, i) =>
      i % 2 === 0
        ? client.events(`s${i % SESSIONS}`, 0, cut.signal)
        : client.stream('/v1/events', 0, cut.signal),
    );
    // Each stream caught up (its first stored event arrived): from here on it reads nothing itself.
    const received = opened.map(() => 0);
    const pumps = opened.map(async (s, i) => {
      try {
        for await (const e of s) if (e.id !== null) received[i]!++;
      } catch {
        // aborted at the end
      }
    });
    while (received.some((n) => n === 0)) await sleep(20);
    const before = reads();
    const startedAt = Date.now();
    for (let i = 0; i < WRITES; i++)
      await writer.enqueueMessage({
        sessionId: `s${i % SESSIONS}`,
        text: `m${i}`,
        now: Date.now(),
        tenant: 'acme',
      });
    // Every stream got the writes meant for it.
    const expected = (i: number) => (i % 2 === 0 ? 1 + WRITES / SESSIONS : SESSIONS + WRITES);
    while (received.some((n, i) => n < expected(i))) {
      assert.ok(Date.now() - startedAt < 30_000, 'the streams got their events');
      await sleep(20);
    }
    // The same period for both runs, so each sees the same number of ticks.
    await sleep(startedAt + 4_000 - Date.now());
    const made = reads() - before;
    cut.abort();
    await Promise.all(pumps);
    return made;
  };
  const one = await readsWith(1);
  const many = await readsWith(200);
  t.diagnostic(`store reads over the same writes and 4 s: 1 stream ${one}, 200 streams ${many}`);
  // Per-stream reads would be at least one per stream per tick: 800 here.
  assert.ok(many <= one + 10, `1 stream: ${one} reads, 200 streams: ${many}`);
});

test('a client that does not read is cut off with an overflow event and resumes after the id it names', async (t) => {
  const { url, token, api } = await serve(t, { bufferBytes: 64 * 1024 });
  await api.enqueueMessage({ sessionId: 's1', agent: 'a', text: 'work', now: Date.now(), tenant: 'acme' });
  const now = Date.now();
  await api.registerWorker({ id: 'w', host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
  const claim = await api.claimRunnableSession('w', now);
  assert.ok(claim);
  const fence = { sessionId: 's1', generation: claim.session.generation, workerId: 'w' };
  const started = await api.startTurn(fence, now);
  assert.ok(started.code === 'ok' && started.value);
  const turnId = started.value.turn.id;

  // A raw client that sends its request and then reads nothing.
  const { hostname: host, port } = new URL(url);
  const socket = net.connect(Number(port), host);
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.pause();
  socket.write(
    `GET /v1/sessions/s1/events HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${token}\r\naccept: text/event-stream\r\n\r\n`,
  );
  await sleep(200);
  // Far more than the kernel's socket buffers and the stream's bound hold.
  const text = 'x'.repeat(8 * 1024);
  for (let i = 0; i < 2_000; i++) {
    assert.equal(await api.recordProgress({ ...fence, turnId, text }, Date.now()), 'ok');
    if (i % 50 === 0) await sleep(1);
  }
  await sleep(500);
  // Now read what the server sent: the events it had buffered, then overflow, then the end.
  socket.resume();
  let body = '';
  socket.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    socket.on('data', (chunk: string) => {
      body += chunk;
    });
    socket.on('end', resolve);
    socket.on('close', () => resolve());
    socket.on('error', reject);
  });
  const blocks = dechunk(body.slice(body.indexOf('\r\n\r\n') + 4))
    .split('\n\n')
    .map((b) => parseSseBlock(b))
    .filter((e): e is StreamedEvent => e !== null);
  const last = blocks.at(-1)!;
  assert.equal(last.type, 'overflow', 'the stream ends with an overflow event');
  const stored = blocks.filter((e) => e.id !== null);
  assert.ok(stored.length > 0 && stored.length < 2_001, `${stored.length} events before the cut`);
  assert.equal(last.data.lastEventId, stored.at(-1)!.id, 'it names the last id sent');

  // The client resumes after that id and gets the rest, none twice.
  const all = await api.eventsAfter('s1', 0, 10_000);
  const rest: number[] = [];
  const client = new ApiClient(url, token);
  for await (const e of client.events('s1', Number(last.data.lastEventId), AbortSignal.timeout(30_000))) {
    if (e.id === null) continue;
    rest.push(e.id);
    if (e.id === all.at(-1)!.id) break;
  }
  assert.deepEqual(
    [...stored.map((e) => e.id!), ...rest],
    all.map((e) => e.id),
  );
});

/** The body of a chunked HTTP/1.1 response (ASCII here, so characters count as bytes). */
function dechunk(raw: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    if (eol < 0) return out;
    const size = Number.parseInt(raw.slice(at, eol), 16);
    if (!(size > 0)) return out;
    out += raw.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}
