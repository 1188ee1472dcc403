/** /v1/tokens (admin only): issue a tenant token (its secret is shown once), list, revoke. */
import type { FastifyPluginAsync } from 'fastify';
import {
  BerthError,
  BY_TOKEN_CREATION,
  createTokenSchema,
  cursorPageQuerySchema,
  nextCursor,
} from '../core/index.js';
import { issueToken } from './api-tokens.js';
import type { PluginDeps } from './deps.js';
import { PAGED } from './route-table.js';

const tag = 'tokens';

export const tokensRoutes: FastifyPluginAsync<PluginDeps> = async (app, { store, clock, routes }) => {
  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/tokens',
      summary:
        'Issue a token for a tenant (optionally setting its fair-share weight); the secret is in this answer only',
      tag,
      access: 'admin',
      status: 201,
      returns: '{token, id, tenant, label, createdAt}',
      body: createTokenSchema,
    },
    async ({ body }) => {
      const { token, row } = await issueToken(store, body.tenant, body.label, clock.now(), body.weight);
      return { token, id: row.tokenId, tenant: row.tenant, label: row.label, createdAt: row.createdAt };
    },
  );
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/tokens',
      summary: `List tokens (never their secrets), oldest first${PAGED}`,
      tag,
      access: 'admin',
      status: 200,
      returns: '{tokens: ApiTokenRow[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ query }) => {
      const tokens = await store.listApiTokens(query);
      return { tokens, next: nextCursor(tokens, query.limit, BY_TOKEN_CREATION) };
    },
  );
  routes.add(
    app,
    {
      method: 'DELETE',
      url: '/v1/tokens/:id',
      summary: 'Revoke a token',
      tag,
      access: 'admin',
      status: 204,
      returns: 'nothing',
    },
    async ({ params }) => {
      if (!(await store.revokeApiToken(params.id!, clock.now()))) {
        throw new BerthError('TOKEN_NOT_FOUND', `Token ${params.id} does not exist or is already revoked`);
      }
      return undefined;
    },
  );
};
