/**
 * The runner's model endpoint on 127.0.0.1:MODEL_ENDPOINT_PORT, for harnesses: their base
 * URL (ANTHROPIC_BASE_URL, Codex's provider base_url, opencode's baseURL) is
 * `http://127.0.0.1:<port>/<api>`, and every request under it is forwarded to the gateway's
 * model proxy (`/v1/model/<api>/…`) over the gateway socket, the body and the answer
 * streamed both ways (Server-Sent Events arrive as the gateway forwards them).
 *
 * Invariants: the credential a harness sends (its placeholder key, in x-api-key or
 * Authorization) never leaves the sandbox; the request carries this sandbox's token
 * instead, which the gateway swaps for the real key on the host. The harness is given
 * neither the key nor the token. Node built-ins only; ships into the sandbox.
 */
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { MODEL_ENDPOINT_PORT, MODEL_PROXY_PATH } from '../core/protocol.js';

/** Hop-by-hop and credential headers: not forwarded from the harness. */
const DROPPED = /^(host|connection|keep-alive|transfer-encoding|authorization|x-api-key|proxy-.*)$/i;

export function startModelEndpoint(gatewaySocket: string, token: string): Promise<void> {
  const server = createServer((req, res) => forward(req, res, gatewaySocket, token));
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(MODEL_ENDPOINT_PORT, '127.0.0.1', () => resolve());
  });
}

/** The base URL a harness is given for a model API (anthropic, openai). */
export function modelEndpointUrl(api: string): string {
  return `http://127.0.0.1:${MODEL_ENDPOINT_PORT}/${api}`;
}

function forward(req: IncomingMessage, res: ServerResponse, gatewaySocket: string, token: string): void {
  const headers: Record<string, string | string[]> = { authorization: `Bearer ${token}` };
  for (const [name, value] of Object.entries(req.headers))
    if (value !== undefined && !DROPPED.test(name)) headers[name] = value;
  const upstream = request(
    { socketPath: gatewaySocket, method: req.method, path: `${MODEL_PROXY_PATH}${req.url ?? '/'}`, headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    },
  );
  upstream.on('error', (err) => {
    if (res.headersSent) return void res.destroy(err);
    const body = JSON.stringify({
      error: { code: 'MODEL_UPSTREAM_FAILED', message: `berth model endpoint: ${err.message}` },
    });
    res.writeHead(502, { 'content-type': 'application/json' }).end(body);
  });
  // The harness went away (killed, timed out): stop the call upstream too.
  res.on('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
}
