/**
 * The control endpoint's file routes (/v1/sessions/:id/sandbox/files...): after the key and
 * the fence, the worker checks the input again (it trusts nothing else the API sends) and
 * does the operation itself on the held sandbox's workspace (sandbox-files.ts). A file's
 * bytes stream both ways; everything else answers JSON.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import {
  BerthError,
  sandboxMkdirSchema,
  sandboxPathQuerySchema,
  sandboxRemoveQuerySchema,
  sandboxRenameSchema,
  sandboxWriteQuerySchema,
} from '../core/index.js';
import { readJson, sendJson } from '../gateway/index.js';
import type { SandboxFiles } from './sandbox-files.js';

const MAX_BODY_BYTES = 64 * 1024;

/** The input as `schema` reads it, or INVALID_INPUT naming the field. */
export function parsedInput<S extends z.ZodTypeAny>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new BerthError(
    'INVALID_INPUT',
    `${what} field ${issue.path.join('.') || '(body)'}: ${issue.message}`,
  );
}

/** Serves `route` (what follows /sandbox/files: '', '/content', '/stat', '/mkdir', '/rename'). */
export async function serveFiles(
  route: string,
  req: IncomingMessage,
  res: ServerResponse,
  files: SandboxFiles,
): Promise<void> {
  const query = Object.fromEntries(new URL(req.url ?? '', 'http://control').searchParams);
  const call = `${req.method} ${route || '/'}`;
  switch (call) {
    case 'GET /content': {
      const { size, body } = await files.read(parsedInput(sandboxPathQuerySchema, query, 'files').path);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
      body.pipe(res);
      res.on('close', () => body.destroy());
      return;
    }
    case 'PUT /content': {
      const { path, mkdirs } = parsedInput(sandboxWriteQuerySchema, query, 'files');
      return sendJson(res, 200, await files.write(path, req, mkdirs));
    }
    case 'GET /':
      return sendJson(res, 200, await files.list(parsedInput(sandboxPathQuerySchema, query, 'files').path));
    case 'GET /stat':
      return sendJson(res, 200, await files.stat(parsedInput(sandboxPathQuerySchema, query, 'files').path));
    case 'DELETE /': {
      const { path, recursive } = parsedInput(sandboxRemoveQuerySchema, query, 'files');
      await files.remove(path, recursive);
      return sendJson(res, 200, { removed: path });
    }
    case 'POST /mkdir': {
      const body = await readJson(req, MAX_BODY_BYTES, 'Control');
      const { path, parents } = parsedInput(sandboxMkdirSchema, body, 'mkdir');
      await files.mkdir(path, parents ?? false);
      return sendJson(res, 200, await files.stat(path));
    }
    case 'POST /rename': {
      const { from, to } = parsedInput(
        sandboxRenameSchema,
        await readJson(req, MAX_BODY_BYTES, 'Control'),
        'rename',
      );
      await files.rename(from, to);
      return sendJson(res, 200, await files.stat(to));
    }
    default:
      throw new BerthError('NOT_FOUND', `No control route ${req.method} ${req.url}`);
  }
}
