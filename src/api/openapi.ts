/**
 * /v1/openapi.json, generated from the route table: every route's zod body and query
 * schemas become JSON Schema, so the document cannot drift from what the API validates.
 */
import { zodToJsonSchema } from 'zod-to-json-schema';
import { errorBodySchema } from '../core/index.js';
import type { RouteDoc } from './route-table.js';

type JsonSchema = Record<string, unknown>;

function jsonSchemaOf(schema: Parameters<typeof zodToJsonSchema>[0]): JsonSchema {
  const { $schema: _, ...rest } = zodToJsonSchema(schema, { target: 'openApi3' }) as JsonSchema;
  return rest;
}

function queryParameters(route: RouteDoc): JsonSchema[] {
  if (!route.query) return [];
  const schema = jsonSchemaOf(route.query) as {
    properties?: Record<string, JsonSchema>;
    required?: string[];
  };
  return Object.entries(schema.properties ?? {}).map(([name, s]) => ({
    name,
    in: 'query',
    required: schema.required?.includes(name) ?? false,
    schema: s,
  }));
}

function pathParameters(url: string): JsonSchema[] {
  return [...url.matchAll(/:(\w+)/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
}

export function buildOpenApi(routes: RouteDoc[], version: string): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) {
    const path = route.url.replace(/:(\w+)/g, '{$1}');
    const error = {
      description: 'Error',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = {
      summary: route.summary,
      tags: [route.tag],
      ...(route.access === 'public' ? { security: [] } : {}),
      ...(route.access === 'admin' ? { description: 'Admin token only.' } : {}),
      parameters: [...pathParameters(route.url), ...queryParameters(route)],
      ...(route.body
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: jsonSchemaOf(route.body) } },
            },
          }
        : {}),
      responses: {
        [route.status]: {
          description: route.returns,
          ...(route.status === 204
            ? {}
            : { content: { [route.stream ? 'text/event-stream' : 'application/json']: {} } }),
        },
        '4XX': error,
        '5XX': error,
      },
    };
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'berth API',
      version,
      description:
        'Crash-safe, disposable sandboxes for AI-agent sessions. Errors: {error: {code, message, hint}}.',
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { Error: jsonSchemaOf(errorBodySchema) },
    },
    security: [{ bearer: [] }],
    paths,
  };
}
