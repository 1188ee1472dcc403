/**
 * /v1/sessions/:id/sandbox/files...: the files of the session's live sandbox (its workspace
 * as the sandbox sees it now; GET /v1/sessions/:id/files is the committed history). The
 * session is the caller's (another tenant's is SESSION_NOT_FOUND); a path is checked here
 * by its text and again on the worker, which does the operation itself on the workspace
 * it holds (worker-proxy.ts; the worker's control-files.ts). A file's bytes stream both
 * ways, never held whole by the API.
 */
import { PassThrough, type Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import {
  type Principal,
  sandboxMkdirSchema,
  sandboxPathQuerySchema,
  sandboxRemoveQuerySchema,
  sandboxRenameSchema,
  sandboxWriteQuerySchema,
  workspaceSegments,
} from '../core/index.js';
import type { PluginDeps } from './deps.js';
import { ownSessionView } from './own-session.js';
import { type RouteMeta, scopeOf } from './route-table.js';
import { callWorker, liveSandboxOf, type WorkerCall } from './worker-proxy.js';

const BASE = '/v1/sessions/:id/sandbox/files';
const tag = 'sandbox';

export const sandboxFilesRoutes: FastifyPluginAsync<PluginDeps> = async (app, deps) => {
  const { store, clock, config, routes } = deps;
  /** Sends `call` for the caller's session to the worker holding its sandbox; `paths` are checked first. */
  const forward = async (
    id: string | undefined,
    principal: Principal,
    reply: FastifyReply,
    paths: string[],
    call: Omit<WorkerCall, 'path'> & { route: string; query?: Record<string, string> },
  ) => {
    const view = await ownSessionView(store, clock, id ?? '', scopeOf(principal));
    // The query parser leaves a value that is not UTF-8 percent-encoded as sent; the URL parser decodes it to U+FFFD, refused.
    const sent = new URL(reply.request.url, 'http://api').searchParams.get('path');
    for (const path of sent === null ? paths : [...paths, sent]) workspaceSegments(path);
    const live = await liveSandboxOf(store, view, clock.now(), config.leaseMs, call.op);
    const gone = new AbortController();
    reply.raw.on('close', () => gone.abort());
    const query = call.query ? `?${new URLSearchParams(call.query)}` : '';
    const path = `/v1/sessions/${encodeURIComponent(view.id)}/sandbox/files${call.route}${query}`;
    return callWorker(live, view.id, { ...call, path }, gone.signal);
  };
  const json = async (answer: { body: Readable }): Promise<unknown> => {
    const chunks: Buffer[] = [];
    for await (const chunk of answer.body) chunks.push(chunk as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  };
  const meta = (method: RouteMeta['method'], route: string, summary: string, returns: string): RouteMeta => ({
    method,
    url: `${BASE}${route}`,
    summary,
    tag,
    access: 'tenant',
    status: 200,
    returns,
  });

  routes.add(
    app,
    {
      ...meta(
        'GET',
        '/content',
        "A file of the session's live sandbox workspace, its bytes streamed (path relative to the workspace, or under /workspace)",
        'application/octet-stream (Content-Length set)',
      ),
      query: sandboxPathQuerySchema,
    },
    async ({ params, principal, query, reply }) => {
      const answer = await forward(params.id, principal, reply, [query.path], {
        method: 'GET',
        route: '/content',
        query: { path: query.path },
        op: 'files read',
      });
      reply.header('content-type', 'application/octet-stream');
      if (answer.length !== null) reply.header('content-length', answer.length);
      return reply.status(200).send(answer.body);
    },
  );

  // A file's bytes, whatever type the client names them (JSON too), go to the worker as a stream: in a context of their own.
  await app.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    routes.add(
      raw,
      {
        ...meta(
          'PUT',
          '/content',
          "Writes a file of the session's live sandbox workspace from the request body, streamed: created or replaced atomically, within the agent's workspaceMb quota (mkdirs=true makes missing parents)",
          'SandboxFileEntry',
        ),
        query: sandboxWriteQuerySchema,
      },
      async ({ params, principal, query, reply, request }) =>
        json(
          await forward(params.id, principal, reply, [query.path], {
            method: 'PUT',
            route: '/content',
            query: { path: query.path, mkdirs: String(query.mkdirs) },
            body: bodyOf(request),
            op: 'files write',
          }),
        ),
    );
  });

  // The routes answering JSON: the same forward, each with its query or body checked and passed on.
  const jsonRoutes: {
    method: WorkerCall['method'];
    route: string;
    op: string;
    summary: string;
    returns: string;
    query?: z.ZodTypeAny;
    body?: z.ZodTypeAny;
  }[] = [
    {
      method: 'GET',
      route: '',
      op: 'files list',
      summary:
        "A directory of the session's live sandbox workspace: its entries (name, type, size, mtimeMs, mode), sorted by name; names that are not UTF-8 are counted in `omitted`",
      returns: '{entries: SandboxFileEntry[], omitted}',
      query: sandboxPathQuerySchema,
    },
    {
      method: 'GET',
      route: '/stat',
      op: 'files stat',
      summary:
        "A path of the session's live sandbox workspace: its type, size, mtimeMs and mode (a symlink is reported, not followed)",
      returns: 'SandboxFileEntry',
      query: sandboxPathQuerySchema,
    },
    {
      method: 'DELETE',
      route: '',
      op: 'files remove',
      summary:
        "Removes a file, symlink or directory of the session's live sandbox workspace (a non-empty directory only with recursive=true)",
      returns: '{removed: path}',
      query: sandboxRemoveQuerySchema,
    },
    {
      method: 'POST',
      route: '/mkdir',
      op: 'files mkdir',
      summary:
        "Makes a directory in the session's live sandbox workspace (parents: true makes missing parents, and an existing directory is fine)",
      returns: 'SandboxFileEntry',
      body: sandboxMkdirSchema,
    },
    {
      method: 'POST',
      route: '/rename',
      op: 'files rename',
      summary: "Moves a path of the session's live sandbox workspace to another (a file there is replaced)",
      returns: 'SandboxFileEntry (of `to`)',
      body: sandboxRenameSchema,
    },
  ];
  for (const { route, op, summary, returns, query: querySchema, body: bodySchema, method } of jsonRoutes)
    routes.add(
      app,
      {
        ...meta(method, route, summary, returns),
        ...(querySchema ? { query: querySchema } : {}),
        ...(bodySchema ? { body: bodySchema } : {}),
      },
      async ({ params, principal, query, body, reply }) => {
        const q = query as Record<string, string | boolean> | undefined;
        const b = body as { path?: string; from?: string; to?: string } | undefined;
        const paths = [q?.path, b?.path, b?.from, b?.to].filter((p): p is string => typeof p === 'string');
        const sent = q && Object.fromEntries(Object.entries(q).map(([k, v]) => [k, String(v)]));
        return json(
          await forward(params.id, principal, reply, paths, {
            method,
            route,
            op,
            ...(sent ? { query: sent } : {}),
            ...(b ? { body: b } : {}),
          }),
        );
      },
    );
};

/**
 * The request's body as a stream of its own: a worker that fails destroys that one, while
 * the client's request stays whole to get the answer (SANDBOX_UNREACHABLE). A client that
 * goes away aborts the call to the worker (forward), which drops the partial file.
 */
function bodyOf(request: FastifyRequest): Readable {
  // No Content-Type: Fastify leaves the body unread, in the request itself.
  const sent = (request.body as Readable | undefined) ?? request.raw;
  const own = new PassThrough();
  sent.on('error', (err) => own.destroy(err));
  return sent.pipe(own);
}
