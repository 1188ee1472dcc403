/**
 * The worker's control endpoint: the API's door to the live sandboxes this worker holds
 * (docs/sandbox-api.md). HTTP/1.1 on TCP, in the worker's process; its address and a key
 * drawn at each start are in the worker's store row. Every request carries
 * `Authorization: Bearer <key>` (compared in constant time: 401 otherwise) and
 * `X-Berth-Fence: <session>.<generation>`: a request is served only by a sandbox this
 * worker holds bound to that session at that generation; any other (an older generation,
 * a session this worker does not hold, a sandbox ending) is 409 STALE_GENERATION, audited
 * as the gateway audits a stale sandbox's write. A command's output streams back as
 * NDJSON lines ending with one terminal line; a request closed early cancels the command.
 * Files are served by the worker itself (control-files.ts).
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import {
  BerthError,
  type Clock,
  EXEC_DEFAULT_TIMEOUT_MS,
  execRequestSchema,
  FENCE_HEADER,
  isTerminalLine,
} from '../core/index.js';
import { type ExecRelay, readJson, SandboxAudit, sendJson } from '../gateway/index.js';
import type { GatewayStore } from '../store/index.js';
import { parsedInput, serveFiles } from './control-files.js';
import type { SandboxFiles } from './sandbox-files.js';

/** A sandbox this worker holds bound to a session: the generation of that binding, its command relay and its workspace's files. */
export interface HeldSandbox {
  generation: number;
  exec: Pick<ExecRelay, 'start'>;
  files: SandboxFiles;
}

export interface ControlServerOptions {
  /** host:port to listen on (port 0: a free one). */
  listen: string;
  /** The bearer key (hex) the API presents; drawn by the worker at start. */
  key: string;
  workerId: string;
  store: Pick<GatewayStore, 'audit'>;
  clock: Clock;
  log: Logger;
  /** The cap on each of a command's output streams, as for a `command` job. */
  maxOutputBytes: number;
  /** The sandbox this worker holds bound to the session, not ending; null when none. */
  held(sessionId: string): HeldSandbox | null;
}

/** /v1/sessions/:id/exec, or /v1/sessions/:id/sandbox/files[/content|/stat|/mkdir|/rename]. */
const ROUTE = /^\/v1\/sessions\/([^/]+)\/(exec|sandbox\/files)(\/[a-z]+)?$/;
const MAX_BODY_BYTES = 256 * 1024;

export class ControlServer {
  private readonly server: Server;
  private readonly audit: SandboxAudit;
  private readonly key: Buffer;

  constructor(private readonly o: ControlServerOptions) {
    this.key = Buffer.from(o.key);
    this.audit = new SandboxAudit(o.store, o.clock);
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => this.fail(res, err));
    });
  }

  /** Listens; returns the URL the API reaches it at. */
  async listen(): Promise<string> {
    const at = this.o.listen.lastIndexOf(':');
    const host = this.o.listen.slice(0, at).replace(/^\[(.*)\]$/, '$1');
    const port = Number(this.o.listen.slice(at + 1));
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve());
    });
    const bound = this.server.address() as AddressInfo;
    const shown = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
    return `http://${shown}:${bound.port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const presented = Buffer.from((req.headers.authorization ?? '').replace(/^Bearer\s+/i, ''));
    if (presented.length !== this.key.length || !timingSafeEqual(presented, this.key))
      throw new BerthError('UNAUTHORIZED', `No valid control key for worker ${this.o.workerId}`);
    const [, sessionId, resource, route] = ROUTE.exec((req.url ?? '').split('?')[0]!) ?? [];
    if (sessionId === undefined || (resource === 'exec' && (req.method !== 'POST' || route !== undefined)))
      throw new BerthError('NOT_FOUND', `No control route ${req.method} ${req.url}`);
    const held = await this.fenced(decodeURIComponent(sessionId), req);
    if (resource !== 'exec') return serveFiles(route ?? '', req, res, held.files);
    const body = await readJson(req, MAX_BODY_BYTES, 'Control');
    const { timeoutMs, ...command } = parsedInput(execRequestSchema, body, 'exec');
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
    res.flushHeaders();
    const cancel = held.exec.start(
      { ...command, timeoutMs: timeoutMs ?? EXEC_DEFAULT_TIMEOUT_MS, maxOutputBytes: this.o.maxOutputBytes },
      (line) => {
        res.write(`${JSON.stringify(line)}\n`);
        if (isTerminalLine(line)) res.end();
      },
    );
    // The API went away (its client did): the command's process group is killed.
    res.on('close', () => {
      if (!res.writableEnded) cancel();
    });
  }

  /** The sandbox bound to the fence's session at its generation; 409 (audited) for anything else. */
  private async fenced(sessionId: string, req: IncomingMessage): Promise<HeldSandbox> {
    const fence = String(req.headers[FENCE_HEADER] ?? '');
    const dot = fence.lastIndexOf('.');
    const generation = Number(fence.slice(dot + 1));
    if (dot <= 0 || fence.slice(0, dot) !== sessionId || !Number.isInteger(generation))
      throw new BerthError(
        'INVALID_INPUT',
        `${FENCE_HEADER} must be <session>.<generation> of session ${sessionId}, got ${JSON.stringify(fence.slice(0, 80))}`,
      );
    const held = this.o.held(sessionId);
    if (held && held.generation === generation) return held;
    const now = this.o.clock.now();
    await this.audit.staleGeneration(
      { sessionId, generation: held?.generation ?? generation, workerId: this.o.workerId },
      `${req.method} ${req.url}`,
      generation,
      now,
      this.o.log,
    );
    throw new BerthError(
      'STALE_GENERATION',
      held
        ? `Session ${sessionId} generation ${generation} is not current here: worker ${this.o.workerId} holds generation ${held.generation} (control)`
        : `Worker ${this.o.workerId} holds no live sandbox of session ${sessionId} (control)`,
    );
  }

  private fail(res: ServerResponse, err: unknown): void {
    const error =
      err instanceof BerthError
        ? err
        : new BerthError('INTERNAL', `Control request failed: ${(err as Error).message}`, { cause: err });
    if (error.code === 'INTERNAL') this.o.log.error({ err }, 'Control request failed');
    if (!res.headersSent) sendJson(res, error.status, error.toJSON());
    else res.end();
  }
}
