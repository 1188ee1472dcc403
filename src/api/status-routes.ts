/**
 * Sessions, queue, sandboxes and workers at a glance: /v1/status (what `berth status`
 * shows) and one route for each part. A tenant sees its own sessions, their sandboxes
 * and queue entries (positions stay global: they count everyone ahead), and the workers.
 */
import type { FastifyPluginAsync } from 'fastify';
import { isLeaseFresh, type SessionView } from '../core/index.js';
import type { PluginDeps } from './deps.js';
import { scopeOf } from './route-table.js';

const tag = 'status';

export const statusRoutes: FastifyPluginAsync<PluginDeps> = async (app, { store, clock, config, routes }) => {
  const workers = async () => {
    const now = clock.now();
    return (await store.listWorkers()).map((w) => ({
      ...w,
      alive: isLeaseFresh(w.heartbeatAt, now, config.leaseMs),
    }));
  };
  const queueOf = (sessions: SessionView[]) =>
    sessions
      .filter((s) => s.queuePosition !== null)
      .sort((a, b) => a.queuePosition! - b.queuePosition!)
      .map((s) => ({ sessionId: s.id, position: s.queuePosition!, pending: s.pending }));
  const sandboxesOf = (sessions: SessionView[]) =>
    sessions
      .filter((s) => s.sandbox !== null)
      .map((s) => ({
        name: s.sandbox!,
        sessionId: s.id,
        generation: s.generation,
        worker: s.leaseOwner,
        status: s.status,
      }));
  const sessions = (tenant: string | undefined) => store.listSessionViews(clock.now(), tenant);

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
      returns: '{sessions, queue, sandboxes, workers}',
    },
    async ({ principal }) => {
      const all = await sessions(scopeOf(principal));
      return { sessions: all, queue: queueOf(all), sandboxes: sandboxesOf(all), workers: await workers() };
    },
  );
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/queue',
      summary: 'Queued sessions in claim order with their positions',
      tag,
      access: 'tenant',
      status: 200,
      returns: '{queue: {sessionId, position, pending}[]}',
    },
    async ({ principal }) => ({ queue: queueOf(await sessions(scopeOf(principal))) }),
  );
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sandboxes',
      summary: 'Sandboxes serving sessions now, with their worker',
      tag,
      access: 'tenant',
      status: 200,
      returns: '{sandboxes: {name, sessionId, generation, worker, status}[]}',
    },
    async ({ principal }) => ({ sandboxes: sandboxesOf(await sessions(scopeOf(principal))) }),
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
};
