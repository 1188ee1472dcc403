/**
 * The runner's HTTP client for its gateway, over the Unix socket mounted at
 * /run/berth. Node built-ins only: this file ships into the sandbox.
 */
import { Agent, request } from 'node:http';

export class GatewayError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`gateway answered ${status}: ${body.slice(0, 200)}`);
  }
}

/** The gateway refused the sandbox itself (a stale generation, a revoked token): nothing it sends will be taken again. */
export function isRevoked(err: unknown): err is GatewayError {
  return err instanceof GatewayError && (err.status === 409 || err.status === 401);
}

export interface GatewayResponse<T> {
  status: number;
  body: T | null;
}

export class GatewayClient {
  private readonly agent = new Agent({ keepAlive: true });

  constructor(
    readonly socketPath: string,
    /** Also the model SDKs' "API key": the gateway swaps it for the real key on the host. */
    readonly token: string,
  ) {}

  async call<T>(
    method: 'GET' | 'POST' | 'PUT',
    path: string,
    body?: unknown,
    timeoutMs = 60_000,
  ): Promise<GatewayResponse<T>> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          socketPath: this.socketPath,
          agent: this.agent,
          method,
          path,
          timeout: timeoutMs,
          headers: {
            authorization: `Bearer ${this.token}`,
            ...(payload === undefined
              ? {}
              : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const status = res.statusCode ?? 0;
            if (status >= 400) return reject(new GatewayError(status, text));
            resolve({ status, body: text ? (JSON.parse(text) as T) : null });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`gateway ${method} ${path} timed out`)));
      req.on('error', reject);
      req.end(payload);
    });
  }
}
