/**
 * `berth mcp --transport http`: MCP's streamable HTTP on POST /mcp, stateless (a fresh
 * server and transport per request), so that every request acts with its own bearer token
 * and this process holds no credential of its own. The token is checked against berth
 * itself before the MCP layer sees the request: no token, or one berth refuses, is 401;
 * a berth that does not answer is its own error (HOST_UNREACHABLE), never a 401.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Berth } from '../client/index.js';
import { BerthError, isBerthError } from '../core/index.js';
import { berthMcpServer } from './mcp-tools.js';

export const MCP_PATH = '/mcp';

function refuse(res: ServerResponse, err: BerthError): void {
  res.writeHead(err.status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(err.toJSON()));
}

function bearer(req: IncomingMessage): string | null {
  const m = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  return m ? m[1]! : null;
}

/** A Berth acting with the request's token, once berth accepted it (one cheap listing). */
async function authenticated(req: IncomingMessage, apiUrl: string): Promise<Berth> {
  const token = bearer(req);
  if (!token)
    throw new BerthError(
      'API_TOKEN_INVALID',
      'No bearer token on the MCP request (berth mcp --transport http)',
    );
  const berth = new Berth({ url: apiUrl, token });
  await berth.sessions.page({ limit: 1 });
  return berth;
}

async function handle(req: IncomingMessage, res: ServerResponse, apiUrl: string, version: string) {
  const url = new URL(req.url ?? '/', 'http://mcp');
  if (url.pathname !== MCP_PATH)
    return refuse(
      res,
      new BerthError('NOT_FOUND', `No route ${url.pathname} on berth mcp`, {
        hint: `Point the MCP client at the endpoint ${MCP_PATH}: http://<host>:<port>${MCP_PATH}`,
      }),
    );
  let berth: Berth;
  try {
    berth = await authenticated(req, apiUrl);
  } catch (err) {
    return refuse(res, isBerthError(err) ? err : new BerthError('INTERNAL', String(err), { cause: err }));
  }
  // Stateless: no session to resume, so nothing to stream on GET or to end on DELETE.
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' }).end();
    return;
  }
  const server = berthMcpServer(berth, version);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
}

/** Listens on `listen` (host:port, port 0: a free one); resolves once listening, with the server (its address says the port). */
export async function listenMcpHttp(listen: string, apiUrl: string, version: string): Promise<Server> {
  const at = listen.lastIndexOf(':');
  const host = listen.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  const port = Number(listen.slice(at + 1));
  const server = createServer((req, res) => {
    handle(req, res, apiUrl, version).catch((err: unknown) => {
      if (!res.headersSent) refuse(res, new BerthError('INTERNAL', String(err), { cause: err }));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
