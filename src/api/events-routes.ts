/**
 * Server-Sent Events: /v1/sessions/:id/events (one session) and /v1/events (every
 * session of the caller's tenant; all of them for the admin). Resumable with
 * Last-Event-ID (or ?after=): stored events carry their id. On the session stream a queue
 * position that moved is sent as an extra `queued` event without an id.
 *
 * Every stream of the process follows one change feed (change-feed.ts): a stream reads
 * the store only to catch up when it opens (from its Last-Event-ID to the feed's settled
 * id, or past it for one session), then gets its events from the feed in memory. The seam
 * loses and repeats nothing: it subscribes before it reads, holds what the feed delivers
 * meanwhile, and drops what it already sent (by id: a session's ids and a tenant
 * subscriber's deliveries both rise).
 *
 * Catching up waits for the client to read (backpressure); once live, a stream whose
 * unsent bytes pass `bufferBytes` (a client that does not read) is cut off with a final
 * `overflow` event naming the id to resume after, so one slow client never holds the
 * process's memory. A client that goes away leaves nothing behind: its subscription and
 * timers end with its connection.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { assertSessionId, BerthError, eventsQuerySchema, type SessionEvent } from '../core/index.js';
import type { ApiStore } from '../store/index.js';
import type { ChangeFeed, FeedFilter, FeedSubscriber } from './change-feed.js';
import type { PluginDeps } from './deps.js';
import { scopeOf } from './route-table.js';

const KEEPALIVE_MS = 15_000;
/** Rows per catch-up read. */
const BATCH = 200;
/** A live stream with more unsent bytes than this is cut off (overflow). @default 1 MiB */
export const DEFAULT_STREAM_BUFFER_BYTES = 1 << 20;
/** Events the feed may hand a stream while it catches up before it is cut off (overflow). */
const MAX_HELD_WHILE_CATCHING_UP = 10_000;
/** A cut-off client that still does not read loses its socket after this. */
const OVERFLOW_LINGER_MS = 30_000;
const tag = 'events';

export const eventsRoutes: FastifyPluginAsync<PluginDeps> = async (app, deps) => {
  const { store, clock, routes, feed } = deps;
  const bufferBytes = deps.streams?.bufferBytes ?? DEFAULT_STREAM_BUFFER_BYTES;
  // Streams never finish on their own: end them when the server closes, or close would wait on them.
  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of open) end();
  });
  const ctx = { store, feed, open, bufferBytes, now: () => clock.now() };

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id/events',
      summary: 'Live events of a session (SSE): queued, started, progress, reply, retrying, failed, archived',
      tag,
      access: 'tenant',
      status: 200,
      returns: 'text/event-stream',
      stream: true,
      query: eventsQuerySchema,
    },
    async ({ params, query, principal, request, reply }) => {
      const sessionId = assertSessionId(params.id!);
      const initial = await store.getSessionView(sessionId, clock.now(), scopeOf(principal));
      if (!initial) throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist`);
      await stream(ctx, request, reply, resumeFrom(request, query.after), {
        filter: { kind: 'session', sessionId },
        position: initial.queuePosition,
      });
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/events',
      summary: "Live events of every session of the caller's tenant (SSE)",
      tag,
      access: 'tenant',
      status: 200,
      returns: 'text/event-stream',
      stream: true,
      query: eventsQuerySchema,
    },
    async ({ query, principal, request, reply }) => {
      await stream(ctx, request, reply, resumeFrom(request, query.after), {
        filter: { kind: 'tenant', tenant: scopeOf(principal) },
        position: null,
      });
    },
  );
};

function resumeFrom(request: FastifyRequest, after: number | undefined): number {
  return Number(request.headers['last-event-id'] ?? after ?? 0) || 0;
}

interface StreamContext {
  store: Pick<ApiStore, 'eventsAfter'>;
  feed: ChangeFeed;
  open: Set<() => void>;
  bufferBytes: number;
  now(): number;
}

type Held = { event: SessionEvent } | { position: number | null };

async function stream(
  ctx: StreamContext,
  request: FastifyRequest,
  reply: FastifyReply,
  from: number,
  o: { filter: FeedFilter; position: number | null },
): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.write('retry: 1000\n\n');

  const sessionId = o.filter.kind === 'session' ? o.filter.sessionId : undefined;
  /** The last id sent: what the client resumes after. */
  let lastId = from;
  let position = o.position;
  let closed = false;
  let catchingUp = true;
  const held: Held[] = [];
  let unsubscribe = () => {};
  const keepalive = setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS);
  const end = () => res.end();
  const finish = () => {
    if (closed) return;
    closed = true;
    ctx.open.delete(end);
    unsubscribe();
    clearInterval(keepalive);
  };
  ctx.open.add(end);
  request.raw.on('close', finish);

  const write = (type: string, data: unknown): boolean =>
    res.write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  const sendEvent = (e: SessionEvent): boolean => {
    if (e.id <= lastId) return true;
    lastId = e.id;
    // A stored `queued` event carries the position: no id-less one for the same.
    if (e.type === 'queued' && typeof e.data.position === 'number') position = e.data.position;
    return res.write(frameOf(e));
  };
  /**
   * The feed hands over a read's events one by one, synchronously: corked until the next
   * tick, they leave as one write to the socket instead of one each.
   */
  let corked = false;
  const cork = () => {
    if (corked) return;
    corked = true;
    res.cork();
    process.nextTick(() => {
      corked = false;
      res.uncork();
    });
  };
  const sendPosition = (p: number | null) => {
    if (p === position) return;
    position = p;
    if (p !== null) write('queued', { sessionId, position: p, at: ctx.now() });
  };
  /** The client does not keep up: a last event naming where to resume, then the end. */
  const overflow = () => {
    write('overflow', { ...(sessionId ? { sessionId } : {}), lastEventId: lastId, at: ctx.now() });
    finish();
    // The connection goes too (after what is buffered): a reconnect opens a fresh one.
    res.end(() => res.socket?.end());
    setTimeout(() => res.destroy(), OVERFLOW_LINGER_MS).unref();
  };
  const live = () => {
    if (!closed && res.writableLength > ctx.bufferBytes) overflow();
  };
  const sub: FeedSubscriber = {
    filter: o.filter,
    deliver(e) {
      if (closed) return;
      if (!catchingUp) {
        cork();
        sendEvent(e);
        live();
      } else if (held.push({ event: e }) > MAX_HELD_WHILE_CATCHING_UP) overflow();
    },
    position(p) {
      if (closed) return;
      if (!catchingUp) {
        sendPosition(p);
        live();
      } else held.push({ position: p });
    },
  };

  try {
    const subscription = await ctx.feed.subscribe(sub);
    unsubscribe = subscription.unsubscribe;
    if (closed) return unsubscribe();
    // Catch up from the store: a session to its newest event, a tenant up to the feed's settled id.
    const upTo = sessionId === undefined ? subscription.settled : Number.MAX_SAFE_INTEGER;
    for (;;) {
      const batch =
        o.filter.kind === 'session'
          ? await ctx.store.eventsAfter(o.filter.sessionId, lastId, BATCH)
          : await ctx.store.eventsAfter(null, lastId, BATCH, o.filter.tenant);
      if (closed) return;
      let done = batch.length < BATCH;
      for (const e of batch) {
        if (e.id > upTo) {
          done = true;
          break;
        }
        if (!sendEvent(e)) await drained(res);
        if (closed) return;
      }
      if (done) break;
    }
    catchingUp = false;
    for (const h of held.splice(0)) {
      if ('event' in h) sendEvent(h.event);
      else sendPosition(h.position);
    }
    live();
  } catch (err) {
    request.log.warn({ err }, 'SSE catch-up failed');
    finish();
    res.end();
  }
}

/**
 * An event's SSE frame, built once however many streams it goes to: the feed hands the
 * same object to every subscriber, so a tenant stream's copy costs no serialisation.
 */
const frames = new WeakMap<SessionEvent, Buffer>();
function frameOf(e: SessionEvent): Buffer {
  let frame = frames.get(e);
  if (frame === undefined) {
    const data = JSON.stringify({ ...e.data, sessionId: e.sessionId, at: e.createdAt });
    frame = Buffer.from(`id: ${e.id}\nevent: ${e.type}\ndata: ${data}\n\n`);
    frames.set(e, frame);
  }
  return frame;
}

/** Resolves when the response's buffer drained, or it closed. */
function drained(res: FastifyReply['raw']): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
