/**
 * Egress interception: a CONNECT to a target with header rules is not spliced.
 * The gateway answers "200 Connection Established", then reads what the sandbox sends: a
 * TLS handshake (first byte 0x16) is terminated with a leaf certificate for the target
 * signed by the per-install CA (the sandbox trusts it through the bundle the runner set
 * up); anything else is plain HTTP. Each HTTP request on the tunnel is forwarded to the
 * target with the rule's headers set from the host's secret store (a header of the same
 * name the sandbox sent is dropped), over TLS verified against the system CAs (plus
 * BERTH_EGRESS_CA_FILE) when the sandbox spoke TLS. A secret the host cannot read refuses
 * the request (502 EGRESS_SECRET_UNAVAILABLE, audited): it is never sent without it.
 * Upgrade requests (WebSocket) are not served on such a tunnel.
 */

import { readFile } from 'node:fs/promises';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIPv4 } from 'node:net';
import { Duplex } from 'node:stream';
import { rootCertificates, TLSSocket } from 'node:tls';
import {
  BerthError,
  type Clock,
  type EgressRule,
  fillTemplate,
  isHeaderValue,
  templateSecrets,
} from '../core/index.js';
import type { EgressAudit } from './egress-audit.js';
import { EgressCa } from './egress-ca.js';
import type { SecretSource } from './model-proxy.js';

/** The first byte of a TLS record carrying a handshake. */
const TLS_HANDSHAKE = 0x16;
const UPSTREAM_TIMEOUT_MS = 10_000;
/** Hop-by-hop headers: they describe one connection, never forwarded either way. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

export interface EgressInterceptorOptions {
  ca: EgressCa;
  secrets: SecretSource;
  /** CA certificates (PEM) upstream TLS is verified against; undefined = Node's default roots. */
  upstreamCa?: string[];
}

export interface InterceptedTarget {
  host: string;
  port: number;
  rule: EgressRule;
}

/** Host-wide: one per worker, shared by its gateways. */
export class EgressInterceptor {
  constructor(private readonly o: EgressInterceptorOptions) {}

  /** The install's CA (made on first use) and the upstream trust: system CAs plus `extraCaFile` (PEM) if set. */
  static async open(o: {
    caDir: string;
    secrets: SecretSource;
    extraCaFile: string;
    /** What certificate validity is judged by. @default systemClock */
    clock?: Clock;
  }): Promise<EgressInterceptor> {
    let upstreamCa: string[] | undefined;
    if (o.extraCaFile) {
      const extra = await readFile(o.extraCaFile, 'utf8').catch((err: Error) => {
        throw new BerthError(
          'CONFIG_INVALID',
          `BERTH_EGRESS_CA_FILE=${o.extraCaFile} cannot be read: ${err.message}`,
        );
      });
      if (!extra.includes('-----BEGIN CERTIFICATE-----')) {
        throw new BerthError(
          'CONFIG_INVALID',
          `BERTH_EGRESS_CA_FILE=${o.extraCaFile} holds no PEM certificate`,
        );
      }
      upstreamCa = [...rootCertificates, extra];
    }
    return new EgressInterceptor({
      ca: await EgressCa.open(o.caDir, o.clock),
      secrets: o.secrets,
      upstreamCa,
    });
  }

  /** The CA certificate (PEM) sandboxes must trust for intercepted TLS. */
  get caCertificatePem(): string {
    return this.o.ca.certificatePem;
  }

  /**
   * Serves an authorized CONNECT tunnel (`client`, with `head` already read past the
   * CONNECT) to `target`; audits every refused request, and the tunnel when it closes.
   */
  async serve(client: Duplex, head: Buffer, target: InterceptedTarget, audit: EgressAudit): Promise<void> {
    const { host, port, rule } = target;
    const injected = Object.keys(rule.headers).map((n) => n.toLowerCase());
    const tunnel = { up: 0, down: 0, requests: 0, failure: '' };
    client.once('close', () => {
      void audit({
        allowed: true,
        host,
        port,
        injected,
        requests: tunnel.requests,
        bytesUp: tunnel.up,
        bytesDown: tunnel.down,
        ...(tunnel.failure ? { reason: tunnel.failure } : {}),
      });
    });
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    const first = head.length > 0 ? head : await nextChunk(client);
    if (!first) {
      client.destroy();
      return;
    }
    const counted = new CountedStream(client, first, tunnel);
    const tls = first[0] === TLS_HANDSHAKE;
    let stream: Duplex = counted;
    try {
      if (tls) {
        stream = new TLSSocket(counted, {
          isServer: true,
          secureContext: this.o.ca.leafFor(host).context,
          ALPNProtocols: ['http/1.1'],
        }).on('error', (err) => {
          tunnel.failure ||= `TLS with the sandbox failed: ${err.message}`;
          client.destroy();
        });
      }
    } catch (err) {
      // The tunnel is already open: the failure can only be audited and the tunnel cut.
      tunnel.failure = `no certificate for ${host}: ${(err as Error).message}`;
      client.destroy();
      return;
    }
    const server = createServer((req, res) => {
      tunnel.requests++;
      this.forward(req, res, target, tls).catch(async (err: unknown) => {
        const error =
          err instanceof BerthError
            ? err
            : new BerthError(
                'EGRESS_FAILED',
                `Request to ${host}:${port} failed: ${(err as Error).message}`,
                {
                  cause: err,
                },
              );
        await audit({
          allowed: error.code !== 'EGRESS_SECRET_UNAVAILABLE',
          host,
          port,
          reason: error.message,
          injected,
        });
        if (res.headersSent) {
          res.destroy();
          return;
        }
        const text = JSON.stringify(error.toJSON());
        res.writeHead(error.status, error.code, { 'content-type': 'application/json' }).end(text);
      });
    });
    server.on('clientError', (err, socket) => {
      tunnel.failure ||= `bad HTTP from the sandbox: ${err.message}`;
      socket.destroy();
    });
    server.emit('connection', stream);
  }

  /** One request: rule headers set from the secret store, streamed to the target and back. */
  private async forward(
    req: IncomingMessage,
    res: ServerResponse,
    target: InterceptedTarget,
    tls: boolean,
  ): Promise<void> {
    const { host, port } = target;
    const ruled = await this.ruleHeaders(target);
    const headers: OutgoingHttpHeaders = {
      ...passedHeaders(req.headers, new Set(Object.keys(ruled).map((n) => n.toLowerCase()))),
      host: port === (tls ? 443 : 80) ? host : `${host}:${port}`,
      ...ruled,
    };
    const options = {
      host,
      port,
      method: req.method,
      path: req.url,
      headers,
      agent: false as const,
      timeout: UPSTREAM_TIMEOUT_MS,
    };
    const upstream = tls
      ? httpsRequest({ ...options, ca: this.o.upstreamCa, ...(isIPv4(host) ? {} : { servername: host }) })
      : httpRequest(options);
    await new Promise<void>((resolve, reject) => {
      upstream.once('timeout', () => upstream.destroy(new Error('timed out')));
      upstream.once('error', reject);
      upstream.once('response', (answer) => {
        res.writeHead(
          answer.statusCode ?? 502,
          answer.statusMessage,
          passedHeaders(answer.headers, new Set()),
        );
        answer.pipe(res);
        answer.once('end', resolve);
        answer.once('error', reject);
      });
      res.once('close', () => upstream.destroy());
      req.pipe(upstream);
    });
  }

  /** The rule's headers with their secrets filled in; refuses when a secret cannot be read. */
  private async ruleHeaders({ host, port, rule }: InterceptedTarget): Promise<Record<string, string>> {
    const filled: Record<string, string> = {};
    for (const [name, template] of Object.entries(rule.headers)) {
      const parsed = templateSecrets(template);
      const names = 'names' in parsed ? parsed.names : [];
      const values: Record<string, string> = {};
      for (const secret of names) {
        const refuse = (why: string, cause?: unknown) =>
          new BerthError(
            'EGRESS_SECRET_UNAVAILABLE',
            `Secret ${secret} of the ${name} header rule for ${host}:${port} ${why}; the request was not sent`,
            { cause },
          );
        const value = await this.o.secrets.get(secret).catch((err: unknown) => {
          throw refuse(`cannot be read: ${(err as Error).message}`, err);
        });
        if (value === undefined) throw refuse('is not set on the host');
        if (!isHeaderValue(value))
          throw refuse('holds characters a header cannot carry (line breaks, control)');
        values[secret] = value;
      }
      filled[name] = fillTemplate(template, values);
    }
    return filled;
  }
}

/** Every header but the hop-by-hop ones, those the Connection header names, and `dropped`. */
function passedHeaders(headers: IncomingHttpHeaders, dropped: Set<string>): OutgoingHttpHeaders {
  const named = String(headers.connection ?? '')
    .split(',')
    .map((n) => n.trim().toLowerCase());
  const passed: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || name === 'host' || HOP_BY_HOP.has(name) || named.includes(name)) continue;
    if (!dropped.has(name)) passed[name] = value;
  }
  return passed;
}

/** The next chunk the socket reads (it is left paused), or null when it ends first. */
function nextChunk(socket: Duplex): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const onData = (chunk: Buffer) => {
      done();
      socket.pause();
      resolve(chunk);
    };
    const onEnd = () => {
      done();
      resolve(null);
    };
    const done = () => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
    };
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
  });
}

/**
 * The tunnel as a plain JS stream, starting with the bytes already read: TLS and the HTTP
 * parser read a socket's handle directly when it has one, which would skip them. Counts
 * the bytes each way for the audit.
 */
class CountedStream extends Duplex {
  constructor(
    private readonly socket: Duplex,
    first: Buffer,
    private readonly tally: { up: number; down: number },
  ) {
    super();
    tally.up += first.length;
    this.push(first);
    socket.on('data', (chunk: Buffer) => {
      tally.up += chunk.length;
      if (!this.push(chunk)) socket.pause();
    });
    socket.once('end', () => this.push(null));
    socket.once('close', () => this.destroy());
    socket.on('error', () => this.destroy());
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.tally.down += chunk.length;
    this.socket.write(chunk, callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.socket.end(callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.socket.destroy();
    callback(error);
  }
}
