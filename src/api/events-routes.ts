/**
 * /v1/sessions/:id/events: Server-Sent Events, resumable with Last-Event-ID (or
 * ?after=). Stored events carry their id; a queue position that moved is sent as an
 * extra `queued` event without an id. Pushed as soon as the store commits in this
 * process; a 1 s tick picks up writes made by other processes sharing the store.
 */
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { assertSessionId, BerthError, type SessionEvent } from '../core/index.js';
import type { ApiDeps } from './deps.js';
import { parseInput } from './validate.js';

const eventsQuery = z.object({ after: z.coerce.number().int().min(0).optional() });
const TICK_MS = 1_000;
const KEEPALIVE_MS = 15_000;

export const eventsRoutes: FastifyPluginAsync<ApiDeps> = async (app, { store, clock }) => {
  // Streams never finish on their own: end them when the server closes, or close would wait on them.
  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of open) end();
  });

  app.get<{ Params: { id: string } }>('/v1/sessions/:id/events', async (request, reply) => {
    const sessionId = assertSessionId(request.params.id);
    const query = parseInput(eventsQuery, request.query, 'query');
    const initial = await store.getSessionView(sessionId, clock.now());
    if (!initial) throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist`);
    const lastEventId = Number(request.headers['last-event-id'] ?? query.after ?? 0) || 0;

    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write('retry: 1000\n\n');

    let cursor = lastEventId;
    let position = initial.queuePosition;
    let busy = false;
    let again = false;
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
          do {
            batch = await store.eventsAfter(sessionId, cursor, 200);
            for (const e of batch) {
              send(e.type, { ...e.data, sessionId, at: e.createdAt }, e.id);
              cursor = e.id;
            }
          } while (batch.length === 200);
          const view = await store.getSessionView(sessionId, clock.now());
          if (view && view.queuePosition !== position) {
            position = view.queuePosition;
            if (position !== null) send('queued', { sessionId, position, at: clock.now() });
          }
        } while (again);
      } catch (err) {
        request.log.warn({ err }, 'SSE flush failed');
      } finally {
        busy = false;
      }
    };
    const unsubscribe = store.onChange(() => void flush());
    const tick = setInterval(() => void flush(), TICK_MS);
    const keepalive = setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS);
    const end = () => res.end();
    open.add(end);
    request.raw.on('close', () => {
      open.delete(end);
      unsubscribe();
      clearInterval(tick);
      clearInterval(keepalive);
    });
    await flush();
  });
};
