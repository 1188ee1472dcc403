/**
 * /v1/webhooks: a tenant's webhooks (per agent or per session), their delivery log, and
 * sending a dead letter again. The secret signs every delivery; it is shown at creation.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import {
  BerthError,
  BY_CREATION,
  createWebhookSchema,
  cursorPageQuerySchema,
  newId,
  nextCursor,
  pageQuerySchema,
} from '../core/index.js';
import type { PluginDeps } from './deps.js';
import { PAGED, scopeOf } from './route-table.js';

const tag = 'webhooks';

export const webhooksRoutes: FastifyPluginAsync<PluginDeps> = async (app, deps) => {
  const { store, clock, routes } = deps;
  const own = async (id: string, tenant: string | undefined) => {
    const hook = await store.getWebhook(id, tenant);
    if (!hook) throw new BerthError('WEBHOOK_NOT_FOUND', `Webhook ${id} does not exist`);
    return hook;
  };

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/webhooks',
      summary: "Send an agent's (or a session's) events to a URL, signed; the secret is in this answer",
      tag,
      access: 'tenant',
      status: 201,
      returns: 'Webhook & {secret}',
      body: createWebhookSchema,
    },
    async ({ body, principal }) => {
      const scope = scopeOf(principal);
      // The webhook belongs to its target's tenant; a tenant's target must be its own (checked by the store).
      const tenant =
        scope ??
        (body.agent !== undefined
          ? (await store.getAgent(body.agent))?.tenant
          : (await store.getSessionView(body.session!, clock.now()))?.tenant);
      if (tenant === undefined) {
        throw body.agent !== undefined
          ? new BerthError('AGENT_NOT_FOUND', `Agent ${body.agent} does not exist`)
          : new BerthError('SESSION_NOT_FOUND', `Session ${body.session} does not exist`);
      }
      const secret = `whsec_${randomBytes(24).toString('base64url')}`;
      const hook = await store.createWebhook(
        {
          id: newId('wh'),
          tenant,
          agent: body.agent ?? null,
          sessionId: body.session ?? null,
          url: body.url,
          secret,
          events: body.events,
        },
        clock.now(),
      );
      return { ...hook, secret };
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/webhooks',
      summary: `List webhooks, oldest first${PAGED}`,
      tag,
      access: 'tenant',
      status: 200,
      returns: '{webhooks: Webhook[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ principal, query }) => {
      const webhooks = await store.listWebhooks(scopeOf(principal), query);
      return { webhooks, next: nextCursor(webhooks, query.limit, BY_CREATION) };
    },
  );

  routes.add(
    app,
    {
      method: 'DELETE',
      url: '/v1/webhooks/:id',
      summary: 'Delete a webhook (deliveries already owed are still sent)',
      tag,
      access: 'tenant',
      status: 204,
      returns: 'nothing',
    },
    async ({ params, principal }) => {
      if (!(await store.deleteWebhook(params.id!, clock.now(), scopeOf(principal)))) {
        throw new BerthError('WEBHOOK_NOT_FOUND', `Webhook ${params.id} does not exist`);
      }
      return undefined;
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/webhooks/:id/deliveries',
      summary: 'Delivery log: each delivery with its status (pending, delivered, dead) and attempts',
      tag,
      access: 'tenant',
      status: 200,
      returns: '{deliveries: (WebhookDelivery & {log: WebhookAttempt[]})[], next}',
      query: pageQuerySchema,
    },
    async ({ params, query, principal }) => {
      const hook = await own(params.id!, scopeOf(principal));
      const deliveries = await store.listWebhookDeliveries(hook.id, query.after, query.limit);
      return { deliveries, next: deliveries.length === query.limit ? deliveries.at(-1)!.id : null };
    },
  );

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/webhooks/:id/deliveries/:delivery/retry',
      summary: 'Send a dead-lettered (or delivered) delivery again from its first attempt',
      tag,
      access: 'tenant',
      status: 202,
      returns: '{retried: true}',
    },
    async ({ params, principal }) => {
      const hook = await own(params.id!, scopeOf(principal));
      const deliveryId = z.coerce.number().int().positive().safeParse(params.delivery);
      const retried =
        deliveryId.success && (await store.retryWebhookDelivery(deliveryId.data, clock.now(), hook.tenant));
      if (!retried) {
        throw new BerthError(
          'WEBHOOK_NOT_FOUND',
          `Delivery ${params.delivery} of webhook ${hook.id} does not exist or is still pending`,
        );
      }
      deps.webhooks?.wake();
      return { retried: true };
    },
  );
};
