/**
 * Bearer-token authentication for every request: sets `request.principal` (null when no
 * Authorization header was sent; each route then decides if it may be public). A header
 * that does not name a live token is a 401 at once, whatever the route.
 */
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../core/index.js';
import type { ApiStore } from '../store/index.js';
import { authenticate } from './api-tokens.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export function installAuth(app: FastifyInstance, store: ApiStore): void {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request) => {
    const header = request.headers.authorization;
    request.principal = header === undefined ? null : await authenticate(store, header);
  });
}
