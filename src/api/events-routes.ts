/**
 * Server-Sent Events: /v1/sessions/:id/events (one session) and /v1/events (every
 * session of the caller's tenant; all of them for the admin). Resumable with
 * Last-Event-ID (or ?after=): stored events carry their id. On the session stream a queue
 * position that moved is sent as an extra `queued` event without an id (a deep position is
 * read less often: decidePositionRead). Pushed as soon as
 * the store commits in this process; a 1 s tick picks up writes made by other processes.
 * A client that goes away leaves nothing behind: its store listener and timers end with
 * its connection.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  assertSessionId,
  BerthError,
  decidePositionRead,
  eventsQuerySchema,
  type SessionEvent,
} from '../core/index.js';
import type { ApiStore } from '../store/index.js';
import type { PluginDeps } from './deps.js';
import { scopeOf } from './route-table.js';

const TICK_MS = 1_000;
const KEEPALIVE_MS = 15_000;
const BATCH = 200;
const tag = 'events';

interface StreamSource {
  /** Events after the cursor, oldest first. */
  after(cursor: number): Promise<SessionEvent[]>;
  /** Extra, id-less events computed on each flush (the session's moved queue position); `sessionChanged`: the flush sent events. */
  extra?(sessionChanged: boolean): Promise<{ type: string; data: unknown } | null>;
  /**
   * The session whose changes wake the stream; others' changes wait for the tick. Without
   * it every stream read the store on every change of every session: with hundreds of
   * streams open that drained the API's connections (seen in a 500-session run).
   */
  sessionId?: string;
}

export const eventsRoutes: FastifyPluginAsync<PluginDeps> = async (app, { store, clock, routes }) => {
  // Streams never finish on their own: end them when the server closes, or close would wait on them.
  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of open) end();
  });

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
      let position = initial.queuePosition;
      let readAt = clock.now();
      await stream(request, reply, store, open, resumeFrom(request, query.after), {
        sessionId,
        after: (cursor) => store.eventsAfter(sessionId, cursor, BATCH),
        async extra(sessionChanged) {
          const now = clock.now();
          if (!decidePositionRead({ position, lastReadAt: readAt, sessionChanged, now })) return null;
          readAt = now;
          const view = await store.getSessionView(sessionId, now);
          if (!view || view.queuePosition === position) return null;
          position = view.queuePosition;
          return position === null
            ? null
            : { type: 'queued', data: { sessionId, position, at: clock.now() } };
        },
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
      const tenant = scopeOf(principal);
      await stream(request, reply, store, open, resumeFrom(request, query.after), {
        after: (cursor) => store.eventsAfter(null, cursor, BATCH, tenant),
      });
    },
  );
};

function resumeFrom(request: FastifyRequest, after: number | undefined): number {
  return Number(request.headers['last-event-id'] ?? after ?? 0) || 0;
}

async function stream(
  request: FastifyRequest,
  reply: FastifyReply,
  store: ApiStore,
  open: Set<() => void>,
  from: number,
  source: StreamSource,
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

  let cursor = from;
  let busy = false;
  let again = false;
  let closed = false;
  const send = (type: string, data: unknown, id?: number) => {
    res.write(`${id === undefined ? '' : `id: ${id}\n`}event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  };
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
        } while (batch.length === BATCH);
        const extra = await source.extra?.(sent);
        if (extra && !closed) send(extra.type, extra.data);
      } while (again && !closed);
    } catch (err) {
      request.log.warn({ err }, 'SSE flush failed');
    } finally {
      busy = false;
    }
  };
  const unsubscribe = store.onChange((change) => {
    if (change.type === 'channel-outbox') return;
    const changed = change.type === 'event' ? change.event.sessionId : change.sessionId;
    if (source.sessionId === undefined || changed === source.sessionId) void flush();
  });
  const tick = setInterval(() => void flush(), TICK_MS);
  const keepalive = setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS);
  const end = () => res.end();
  open.add(end);
  request.raw.on('close', () => {
    closed = true;
    open.delete(end);
    unsubscribe();
    clearInterval(tick);
    clearInterval(keepalive);
  });
  await flush();
}
