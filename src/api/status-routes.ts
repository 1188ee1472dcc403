/** /v1/status: sessions, queue, sandboxes and workers at a glance (what `berth status` shows). */
import type { FastifyPluginAsync } from 'fastify';
import { isLeaseFresh } from '../core/index.js';
import type { ApiDeps } from './deps.js';

export const statusRoutes: FastifyPluginAsync<ApiDeps> = async (app, { store, clock, config }) => {
  app.get('/healthz', async () => ({ ok: true }));

  app.get('/v1/status', async () => {
    const now = clock.now();
    const sessions = await store.listSessionViews(now);
    const workers = (await store.listWorkers()).map((w) => ({
      ...w,
      alive: isLeaseFresh(w.heartbeatAt, now, config.leaseMs),
    }));
    return {
      sessions,
      queue: sessions
        .filter((s) => s.queuePosition !== null)
        .sort((a, b) => a.queuePosition! - b.queuePosition!)
        .map((s) => ({ sessionId: s.id, position: s.queuePosition, pending: s.pending })),
      sandboxes: sessions
        .filter((s) => s.sandbox !== null)
        .map((s) => ({
          name: s.sandbox,
          sessionId: s.id,
          generation: s.generation,
          worker: s.leaseOwner,
          status: s.status,
        })),
      workers,
    };
  });
};
