/**
 * POST /v1/sessions/:id/exec: a command in the session's live sandbox, its output streamed
 * as NDJSON lines (core/exec.ts) as the worker sends them. The session is the caller's
 * (another tenant's is SESSION_NOT_FOUND); the request goes to the worker holding its
 * sandbox (worker-proxy.ts). The stream always ends with one terminal line: the worker's,
 * or SANDBOX_RESTARTED (WorkerLost) when the worker's stream breaks off without one. A
 * client that goes away aborts the request to the worker, which kills the command.
 */
import type { FastifyPluginAsync } from 'fastify';
import { type ExecLine, execRequestSchema, isTerminalLine } from '../core/index.js';
import type { PluginDeps } from './deps.js';
import { ownSessionView } from './own-session.js';
import { scopeOf } from './route-table.js';
import { callWorker, liveSandboxOf } from './worker-proxy.js';

export const execRoutes: FastifyPluginAsync<PluginDeps> = async (app, deps) => {
  const { store, clock, config, routes } = deps;
  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/sessions/:id/exec',
      summary:
        "Run a command in the session's live sandbox (a resident agent's, or one serving a turn); its output streams back as NDJSON lines: stdout, stderr, then exit (or error)",
      tag: 'sessions',
      access: 'tenant',
      status: 200,
      returns: 'application/x-ndjson: ExecLine per line',
      body: execRequestSchema,
    },
    async ({ body, params, principal, request, reply }) => {
      const view = await ownSessionView(store, clock, params.id ?? '', scopeOf(principal));
      const live = await liveSandboxOf(store, view, clock.now(), config.leaseMs, 'exec');
      const gone = new AbortController();
      const { body: upstream } = await callWorker(
        live,
        view.id,
        { method: 'POST', path: `/v1/sessions/${encodeURIComponent(view.id)}/exec`, body, op: 'exec' },
        gone.signal,
      );
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
      res.flushHeaders();
      res.on('close', () => {
        if (!res.writableEnded) gone.abort();
      });
      let ended = false;
      let partial = '';
      upstream.setEncoding('utf8');
      try {
        for await (const chunk of upstream as AsyncIterable<string>) {
          const lines = (partial + chunk).split('\n');
          partial = lines.pop() ?? '';
          for (const text of lines.filter((l) => l !== '')) {
            ended ||= isTerminalLine(JSON.parse(text) as ExecLine);
            res.write(`${text}\n`);
          }
        }
      } catch (err) {
        request.log.info({ err, sessionId: view.id, workerId: live.workerId }, 'Exec stream from worker cut');
      }
      if (gone.signal.aborted) return;
      if (!ended) {
        const lost: ExecLine = {
          type: 'error',
          code: 'SANDBOX_RESTARTED',
          reason: 'WorkerLost',
          message: `Worker ${live.workerId} holding session ${view.id}'s sandbox went away while the command ran`,
        };
        res.write(`${JSON.stringify(lost)}\n`);
      }
      res.end();
    },
  );
};
