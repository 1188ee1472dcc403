/**
 * Storage grants of an agent: GET/POST/DELETE /v1/agents/:name/grants, and the
 * operator's read of what an agent stored, GET /v1/agents/:name/storage (keys, sizes and
 * hashes; never content). Each tenant its own agents: another tenant's agent is 404.
 * The gateway reads the grants on every storage call, so a change applies at once.
 */
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import {
  BY_PREFIX,
  cursorPageQuerySchema,
  nextCursor,
  storageGrantInputSchema,
  storageListingOf,
} from '../core/index.js';
import type { PluginDeps } from './deps.js';
import { PAGED, scopeOf } from './route-table.js';

const tag = 'storage';
const revokeQuerySchema = z.object({ prefix: z.string().max(1024) }).strict();
const objectsQuerySchema = z
  .object({
    prefix: z.string().max(1024).default(''),
    after: z.string().max(1024).default(''),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

export const grantsRoutes: FastifyPluginAsync<PluginDeps> = async (app, { store, clock, routes }) => {
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/agents/:name/grants',
      summary: `An agent's storage grants, by prefix${PAGED}`,
      tag,
      access: 'tenant',
      status: 200,
      returns: '{grants: StorageGrant[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ params, principal, query }) => {
      const grants = await store.listStorageGrants(params.name!, scopeOf(principal), query);
      return { grants, next: nextCursor(grants, query.limit, BY_PREFIX) };
    },
  );
  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/agents/:name/grants',
      summary: "Grant an agent operations on the storage keys under a prefix (replaces that prefix's ops)",
      tag,
      access: 'tenant',
      status: 201,
      returns: 'StorageGrant',
      body: storageGrantInputSchema,
    },
    async ({ params, body, principal }) =>
      store.grantStorage({ agent: params.name!, ...body }, clock.now(), scopeOf(principal)),
  );
  routes.add(
    app,
    {
      method: 'DELETE',
      url: '/v1/agents/:name/grants',
      summary: "Revoke an agent's storage grant of one prefix (?prefix=photos/)",
      tag,
      access: 'tenant',
      status: 204,
      returns: 'nothing',
      query: revokeQuerySchema,
    },
    async ({ params, query, principal }) => {
      await store.revokeStorageGrant(params.name!, query.prefix, scopeOf(principal));
      return undefined;
    },
  );
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/agents/:name/storage',
      summary:
        "What an agent stored: keys, sizes, hashes (a page in key order; `next` is the next page's after)",
      tag,
      access: 'tenant',
      status: 200,
      returns: '{objects: StorageObject[], next: string | null}',
      query: objectsQuerySchema,
    },
    async ({ params, query, principal }) => {
      const agent = params.name!;
      // Checks the agent is the caller's (AGENT_NOT_FOUND otherwise) before its keys are read.
      await store.listStorageGrants(agent, scopeOf(principal));
      const rows = await store.listStorageObjects(agent, { ...query, limit: query.limit + 1 });
      return storageListingOf(rows, query.limit);
    },
  );
};
