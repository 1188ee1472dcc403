/**
 * N open SSE streams on one API process while sessions write events, against a baseline
 * measured in the same run: the per-stream routes as they were before the change feed
 * (each stream read the store on its own 1 s tick and on its session's changes, and read
 * its queue position itself), kept below for that purpose only. Both serve the same
 * streams (90 % session streams over 50 sessions, 10 % tenant streams) over the same
 * workload, written through a second store connection (another process's writes, heard
 * through the SQLite relay or the tick), one after the other, so neither competes with
 * the other for the CPU. Figures: the API's store reads per second, each event's delivery
 * delay (its commit → a stream got it) p50/p99 over every stream that wants it, and what a
 * user's POST (→ 202) and GET /v1/status take meanwhile, against the same with no stream
 * open (baselineNoStreams). The streams' clients run in this process, beside the API.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { pino } from 'pino';
import { issueToken } from '../src/api/api-tokens.js';
import { buildApp } from '../src/api/index.js';
import { ApiClient, type StreamedEvent } from '../src/client/index.js';
import { agentSpecSchema, loadConfig, type SessionEvent, systemClock } from '../src/core/index.js';
import { type ApiStore, openSqliteStore } from '../src/store/index.js';
import { countingStreamReads } from '../test/helpers/counting-store.js';
import { type BenchOptions, round, stats } from './harness.js';

const SESSIONS = 50;
const WRITE_EVERY_MS = 10;
const PROBE_EVERY_MS = 50;

export async function sseStreams({ quick }: BenchOptions) {
  const streams = quick ? 200 : 5_000;
  const seconds = quick ? 8 : 20;
  const dir = await mkdtemp(join(tmpdir(), 'berth-bench-sse-'));
  try {
    const baseline = await measure(dir, 'baseline', streams, seconds);
    const feed = await measure(dir, 'feed', streams, seconds);
    // The same writes and probes with no stream open: what the streams cost a POST and /v1/status.
    const baselineNoStreams = await measure(dir, 'feed', 0, seconds, 'no-streams');
    return {
      bench: 'sse-streams',
      streams,
      seconds,
      eventsPerSecond: 1000 / WRITE_EVERY_MS,
      feed,
      baseline,
      baselineNoStreams,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function measure(
  dir: string,
  mode: 'feed' | 'baseline',
  n: number,
  seconds: number,
  name: string = mode,
) {
  const config = loadConfig({});
  const path = join(dir, 'berth.db');
  const open = () => openSqliteStore({ path, leaseMs: config.leaseMs, retry: config });
  const api = open();
  const writer = open();
  const { store: counted, reads } = countingStreamReads(api);
  const log = pino({ level: 'silent' });
  const tenant = `bench-${name}`;
  const token = (await issueToken(api, tenant, '', Date.now())).token;
  const app =
    mode === 'feed'
      ? await buildApp({ config, store: counted, clock: systemClock, log })
      : await legacyApp(counted, token, tenant);
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  const client = new ApiClient(url, token);
  const agent = `sse-${name}`;
  await api.createAgent(agentSpecSchema.parse({ name: agent, provider: 'command' }), Date.now(), tenant);
  const session = (i: number) => `${name}-s${i}`;
  for (let i = 0; i < SESSIONS; i++)
    await writer.enqueueMessage({ sessionId: session(i), agent, text: 'first', now: Date.now(), tenant });
  const after = await api.lastEventId();

  const delays: number[] = [];
  const cut = new AbortController();
  let measuring = false;
  const opened = Array.from({ length: n }, (_, i) =>
    i % 10 === 9
      ? client.stream('/v1/events', after, cut.signal)
      : client.events(session(i % SESSIONS), after, cut.signal),
  );
  let connected = 0;
  const pumps = opened.map(async (s) => {
    try {
      let first = true;
      for await (const e of s as AsyncGenerator<StreamedEvent>) {
        if (first) {
          first = false;
          connected++;
        }
        if (e.id !== null && measuring) delays.push(Date.now() - Number(e.data.at));
      }
    } catch {
      // cut at the end
    }
  });
  // A stream counts as open at its first event: one per session.
  for (let i = 0; i < SESSIONS; i++)
    await writer.enqueueMessage({ sessionId: session(i), text: 'open', now: Date.now(), tenant });
  const openDeadline = Date.now() + 120_000;
  while (connected < n && Date.now() < openDeadline) await new Promise((r) => setTimeout(r, 50));

  measuring = true;
  const before = reads();
  const t0 = Date.now();
  // A user's requests while the streams are open: a POST (→ 202) and /v1/status, every PROBE_EVERY_MS.
  const postMs: number[] = [];
  const statusMs: number[] = [];
  const probes = (async () => {
    if (mode !== 'feed') return; // the baseline's routes are the streams' only
    for (let k = 0; Date.now() - t0 < seconds * 1000; k++) {
      const p0 = performance.now();
      await client.request('POST', `/v1/sessions/${name}-probe${k}/messages`, { text: 'probe', agent });
      const p1 = performance.now();
      await client.request('GET', '/v1/status');
      statusMs.push(performance.now() - p1);
      postMs.push(p1 - p0);
      await new Promise((r) => setTimeout(r, PROBE_EVERY_MS));
    }
  })();
  let written = 0;
  while (Date.now() - t0 < seconds * 1000) {
    await writer.enqueueMessage({
      sessionId: session(written % SESSIONS),
      text: `m${written}`,
      now: Date.now(),
      tenant,
    });
    written++;
    await new Promise((r) => setTimeout(r, WRITE_EVERY_MS));
  }
  await probes;
  await new Promise((r) => setTimeout(r, 1_500));
  const elapsedS = (Date.now() - t0) / 1000;
  const readsPerSecond = round((reads() - before) / elapsedS);
  measuring = false;
  cut.abort();
  await Promise.all(pumps);
  await app.close();
  await api.close();
  await writer.close();
  return {
    connected,
    written,
    readsPerSecond,
    deliveries: delays.length,
    deliveryDelayMs: delays.length > 0 ? stats(delays) : null,
    postAcceptedMs: postMs.length > 0 ? stats(postMs) : null,
    statusMs: statusMs.length > 0 ? stats(statusMs) : null,
  };
}

/**
 * The routes before the change feed, for the baseline only: every stream reads the store on
 * its own 1 s tick and on its session's changes, and its session's queue position itself
 * (as decidePositionRead had it). Auth is one token, checked by equality.
 */
async function legacyApp(store: ApiStore, token: string, tenant: string) {
  const app = Fastify({ loggerInstance: pino({ level: 'silent' }) });
  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of open) end();
  });
  const authorized = (request: FastifyRequest) => request.headers.authorization === `Bearer ${token}`;
  const afterOf = (request: FastifyRequest) =>
    Number((request.query as { after?: string }).after ?? request.headers['last-event-id'] ?? 0) || 0;
  app.get('/v1/sessions/:id/events', async (request, reply) => {
    if (!authorized(request)) return reply.code(401).send();
    const sessionId = (request.params as { id: string }).id;
    const initial = await store.getSessionView(sessionId, Date.now(), tenant);
    let position = initial?.queuePosition ?? null;
    let readAt = Date.now();
    await legacyStream(request, reply, store, open, afterOf(request), {
      sessionId,
      after: (cursor) => store.eventsAfter(sessionId, cursor, 200),
      async extra(sessionChanged) {
        const now = Date.now();
        const everyMs = position === null ? 0 : Math.min(30_000, (position - 1) * 1);
        if (!sessionChanged && position !== null && now - readAt < everyMs) return null;
        readAt = now;
        const view = await store.getSessionView(sessionId, now);
        if (!view || view.queuePosition === position) return null;
        position = view.queuePosition;
        return position === null ? null : { type: 'queued', data: { sessionId, position, at: Date.now() } };
      },
    });
  });
  app.get('/v1/events', async (request, reply) => {
    if (!authorized(request)) return reply.code(401).send();
    await legacyStream(request, reply, store, open, afterOf(request), {
      after: (cursor) => store.eventsAfter(null, cursor, 200, tenant),
    });
  });
  return app;
}

interface LegacySource {
  after(cursor: number): Promise<SessionEvent[]>;
  extra?(sessionChanged: boolean): Promise<{ type: string; data: unknown } | null>;
  sessionId?: string;
}

async function legacyStream(
  request: FastifyRequest,
  reply: FastifyReply,
  store: ApiStore,
  open: Set<() => void>,
  from: number,
  source: LegacySource,
): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write('retry: 1000\n\n');
  let cursor = from;
  let busy = false;
  let again = false;
  let closed = false;
  const send = (type: string, data: unknown, id?: number) =>
    res.write(`${id === undefined ? '' : `id: ${id}\n`}event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  const flush = async () => {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      do {
        again = false;
        let batch: SessionEvent[];
        let sent = false;
        do {
          batch = await source.after(cursor);
          if (closed) return;
          for (const e of batch) {
            send(e.type, { ...e.data, sessionId: e.sessionId, at: e.createdAt }, e.id);
            cursor = e.id;
            sent = true;
          }
        } while (batch.length === 200);
        const extra = await source.extra?.(sent);
        if (extra && !closed) send(extra.type, extra.data);
      } while (again && !closed);
    } catch {
      // as before: the next tick tries again
    } finally {
      busy = false;
    }
  };
  const unsubscribe = store.onChange((change) => {
    if (change.type === 'channel-outbox') return;
    const changed = change.type === 'event' ? change.event.sessionId : change.sessionId;
    if (source.sessionId === undefined || changed === source.sessionId) void flush();
  });
  const tick = setInterval(() => void flush(), 1_000);
  const end = () => res.end();
  open.add(end);
  request.raw.on('close', () => {
    closed = true;
    open.delete(end);
    unsubscribe();
    clearInterval(tick);
  });
  await flush();
}
