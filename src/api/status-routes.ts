/**
 * Sessions, queue, sandboxes and workers at a glance: /v1/status (what `berth status`
 * shows) and one route for each part; and draining a worker (admin). A tenant sees its own sessions, their sandboxes
 * and queue entries (positions stay global: they count everyone ahead), and the workers.
 * The queue is listed a page at a time in claim order, read without listing the queue
 * (the store's listQueue), let alone every session.
 * /v1/status reads no session one by one: the counts the store keeps, the queue's depth (a
 * count on its index), the recent sandboxes (bounded) and the workers, so its cost does not
 * grow with the number of sessions; the sessions themselves are listed a page at a time
 * (GET /v1/sessions).
 * Sandboxes are their workers' reports of each lifecycle (warm ones too, for the operator):
 * every one not gone, and those gone in the last RECENTLY_ENDED_MS with why they ended.
 */
import type { FastifyPluginAsync } from 'fastify';
import {
  BerthError,
  BY_CLAIM,
  cursorPageQuerySchema,
  isLeaseFresh,
  isPlannedEnd,
  nextCursor,
} from '../core/index.js';
import type { PluginDeps } from './deps.js';
import { PAGED, scopeOf } from './route-table.js';

const tag = 'status';
/** How far back ended sandboxes are listed, with their end reason. */
const RECENTLY_ENDED_MS = 10 * 60_000;
const MAX_SANDBOXES = 500;

export const statusRoutes: FastifyPluginAsync<PluginDeps> = async (app, { store, clock, config, routes }) => {
  const workers = async () => {
    const now = clock.now();
    return (await store.listWorkers()).map((w) => ({
      ...w,
      alive: isLeaseFresh(w.heartbeatAt, now, config.leaseMs),
    }));
  };
  const sandboxes = async (tenant: string | undefined) =>
    (await store.listSandboxes(clock.now() - RECENTLY_ENDED_MS, MAX_SANDBOXES, tenant)).map((s) => ({
      ...s,
      endPlanned: s.endReason === null ? null : isPlannedEnd(s.endReason),
    }));

  app.get('/healthz', async () => ({ ok: true }));

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/status',
      summary: 'Sessions, queue, sandboxes and workers at a glance',
      tag,
      access: 'tenant',
      status: 200,
      returns: '{counts: SessionCounts, queueDepth, sandboxes, workers}',
    },
    async ({ principal }) => ({
      counts: await store.sessionCounts(scopeOf(principal)),
      queueDepth: await store.queueDepth(clock.now()),
      sandboxes: await sandboxes(scopeOf(principal)),
      workers: await workers(),
    }),
  );
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/queue',
      summary: `Queued sessions in claim order with their positions (global: they count every tenant's sessions ahead)${PAGED}`,
      tag,
      access: 'tenant',
      status: 200,
      returns: '{queue: {sessionId, position, pending}[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ principal, query }) => {
      const page = await store.listQueue(clock.now(), scopeOf(principal), query);
      return {
        queue: page.map(({ sessionId, position, pending }) => ({ sessionId, position, pending })),
        next: nextCursor(page, query.limit, BY_CLAIM),
      };
    },
  );
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sandboxes',
      summary:
        'Sandboxes (warm, bound, serving, draining, and ended in the last 10 min with why), newest first',
      tag,
      access: 'tenant',
      status: 200,
      returns:
        '{sandboxes: {name, workerId, phase, pooled, sessionId, generation, turnId, endReason, endPlanned (false: a fault), endMessage, createdAt, updatedAt, endedAt}[]}',
    },
    async ({ principal }) => ({ sandboxes: await sandboxes(scopeOf(principal)) }),
  );
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/workers',
      summary: 'Workers with their slots and liveness',
      tag,
      access: 'tenant',
      status: 200,
      returns: '{workers: (WorkerRow & {alive})[]}',
    },
    async () => ({ workers: await workers() }),
  );
  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/workers/:id/drain',
      summary:
        'Drain a worker, as its SIGTERM does: it claims nothing more, lets running turns finish within its drain grace, then stops',
      tag,
      access: 'admin',
      status: 202,
      returns: '{worker: WorkerRow & {alive}}',
    },
    async ({ params }) => {
      if (!(await store.drainWorker(params.id!, clock.now())))
        throw new BerthError('WORKER_NOT_FOUND', `Worker ${params.id} does not exist (or has stopped)`);
      return { worker: (await workers()).find((w) => w.id === params.id) };
    },
  );
};
