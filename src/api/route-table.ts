/**
 * Routes declared once: each `addRoute` registers the Fastify handler and records the
 * route's zod schemas, from which /v1/openapi.json is generated. The wrapper validates
 * params, query and body with those schemas (400 INVALID_INPUT naming the field) and
 * enforces the route's access level before the handler runs, so a handler never sees
 * unchecked input or a caller it must not serve.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { BerthError, type Principal } from '../core/index.js';
import { parseInput } from './validate.js';

export type Access = 'public' | 'tenant' | 'admin';
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface RouteMeta {
  method: Method;
  /** Fastify syntax: /v1/sessions/:id */
  url: string;
  summary: string;
  tag: string;
  access: Access;
  /** Success status. */
  status: number;
  /** What the success body is (a core record type, or text/event-stream). */
  returns: string;
  /** Server-Sent Events instead of JSON. */
  stream?: boolean;
}

export interface RouteDoc extends RouteMeta {
  body?: z.ZodTypeAny;
  query?: z.ZodTypeAny;
}

export interface RouteInput<B extends z.ZodTypeAny, Q extends z.ZodTypeAny> {
  body: z.output<B>;
  query: z.output<Q>;
  params: Record<string, string>;
  /** null only on public routes. */
  principal: Principal;
  request: FastifyRequest;
  reply: FastifyReply;
}

export class RouteTable {
  readonly routes: RouteDoc[] = [];

  add<B extends z.ZodTypeAny = z.ZodUndefined, Q extends z.ZodTypeAny = z.ZodUndefined>(
    app: FastifyInstance,
    doc: RouteMeta & {
      body?: B;
      query?: Q;
      /** Validates the body instead of the first-issue check (e.g. to report every issue of an agent file). */
      parseBody?: (value: unknown) => z.output<B>;
    },
    handler: (input: RouteInput<B, Q>) => Promise<unknown>,
  ): void {
    const { parseBody, ...documented } = doc;
    this.routes.push(documented);
    app.route({
      method: doc.method,
      url: doc.url,
      handler: async (request, reply) => {
        const principal = request.principal;
        if (doc.access !== 'public' && !principal) {
          throw new BerthError('API_TOKEN_INVALID', 'No API token was sent (Authorization: Bearer <token>)');
        }
        if (doc.access === 'admin' && !principal?.admin) {
          throw new BerthError('ADMIN_ONLY', `${doc.method} ${doc.url} is for the operator's admin token`);
        }
        const input: RouteInput<B, Q> = {
          body: parseBody
            ? parseBody(request.body ?? {})
            : doc.body
              ? parseInput(doc.body, request.body, 'body')
              : undefined,
          query: doc.query ? parseInput(doc.query, request.query, 'query') : undefined,
          params: request.params as Record<string, string>,
          principal: principal as Principal,
          request,
          reply,
        };
        const result = await handler(input);
        if (reply.sent) return reply;
        return reply.status(doc.status).send(result);
      },
    });
  }
}

/** The end of a keyset-paginated listing's summary: how its pages go. */
export const PAGED =
  ", a page at a time (`after`: the previous page's `next`, an opaque cursor; `limit`: default 100, at most 500; `next` is null on the last page)";

/** The tenant a principal's reads and writes are scoped to; undefined = the operator (every tenant). */
export function scopeOf(principal: Principal): string | undefined {
  return principal.admin ? undefined : (principal.tenant ?? undefined);
}
