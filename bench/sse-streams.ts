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
 * open (baselineNoStreams), and the API thread's CPU per delivery. The streams' clients, the writer and the probes run in a worker
 * thread (sse-stream-clients.ts), so the API's thread does only what an API process does.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { pino } from 'pino';
import { issueToken } from '../src/api/api-tokens.js';
import { buildApp } from '../src/api/index.js';
import { agentSpecSchema, loadConfig, type SessionEvent, systemClock } from '../src/core/index.js';
import { type ApiStore, openSqliteStore } from '../src/store/index.js';
import { countingStreamReads } from '../test/helpers/counting-store.js';
import { type BenchOptions, round } from './harness.js';
import { type StreamClientsJob, type StreamClientsResult, WRITE_EVERY_MS } from './sse-stream-clients.js';

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
  const api = openSqliteStore({ path, leaseMs: config.leaseMs, retry: config });
  const { store: counted, reads } = countingStreamReads(api);
  const log = pino({ level: 'silent' });
  const tenant = `bench-${name}`;
  const token = (await issueToken(api, tenant, '', Date.now())).token;
  const app =
    mode === 'feed'
      ? await buildApp({ config, store: counted, clock: systemClock, log })
      : await legacyApp(counted, token, tenant);
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  const agent = `sse-${name}`;
  await api.createAgent(agentSpecSchema.parse({ name: agent, provider: 'command' }), Date.now(), tenant);

  // The clients, the writer (another process's writes, through its own store connection)
  // and the user's probes run in a thread of their own: this thread is the API process alone.
  const job: StreamClientsJob = {
    url,
    token,
    dbPath: path,
    name,
    tenant,
    agent,
    streams: n,
    seconds,
    probe: mode === 'feed',
  };
  const clients = new Worker(new URL('./sse-stream-clients.js', import.meta.url), { workerData: job });
  let before = 0;
  let t0 = 0;
  let cpu0 = process.threadCpuUsage();
  const result = await new Promise<StreamClientsResult>((resolve, reject) => {
    clients.on('message', (m: { measuring: true } | { done: StreamClientsResult }) => {
      if ('measuring' in m) {
        before = reads();
        t0 = Date.now();
        cpu0 = process.threadCpuUsage();
      } else resolve(m.done);
    });
    clients.once('error', reject);
    clients.once('exit', (code) => reject(new Error(`stream clients exited with ${code}`)));
  });
  const cpu = process.threadCpuUsage(cpu0);
  const elapsedS = (Date.now() - t0) / 1000;
  const readsPerSecond = round((reads() - before) / elapsedS);
  // The API thread's CPU (user + system) per second and per delivery: what the streams cost
  // the process, and a figure other jobs on the machine move far less than latencies.
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const apiCpu = {
    msPerSecond: round(cpuMs / elapsedS),
    usPerDelivery: result.figures.deliveries > 0 ? round((cpuMs * 1000) / result.figures.deliveries) : null,
  };
  await clients.terminate();
  await app.close();
  await api.close();
  return { connected: result.connected, written: result.written, readsPerSecond, apiCpu, ...result.figures };
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
