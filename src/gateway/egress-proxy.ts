/**
 * The egress door: HTTP CONNECT on the sandbox's gateway socket. A
 * sandbox has no network; the runner's proxy on 127.0.0.1:3128 turns every outbound
 * connection of a tool into a CONNECT here, carrying the sandbox token. The gateway
 * checks the token like any other request (a stale generation gets 409 and an audit row:
 * side effects are fenced, not only writes), then the agent's allowlist of host:port
 * (default: deny all), and only then connects from the host. Every decision is audited
 * with the agent, session, generation, host, port and, for an allowed tunnel, its bytes
 * each way once it closes. A target with header rules is intercepted instead of spliced
 * (egress-intercept.ts); every other tunnel carries bytes as they are.
 */
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { BerthError, type EgressRule, egressTarget } from '../core/index.js';
import type { EgressAudit } from './egress-audit.js';
import type { EgressInterceptor } from './egress-intercept.js';

export interface EgressPolicy {
  agent: string;
  /** Allowed "host:port" targets, exact, each with its header rules. Empty = deny all. */
  rules: readonly EgressRule[];
  /** Serves the targets with header rules; without it such a target is refused. */
  interceptor?: EgressInterceptor;
}

/** Connection attempts to an allowed target give up after this. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Serves one authorized CONNECT: refuses a target off the allowlist (403), otherwise opens
 * the host connection and splices the two sockets. Tunnels are tracked so the gateway can
 * cut them when the sandbox ends.
 */
export class EgressProxy {
  private readonly tunnels = new Set<Duplex>();

  constructor(
    private readonly policy: EgressPolicy,
    private readonly audit: EgressAudit,
  ) {}

  async connect(target: string, client: Duplex, head: Buffer): Promise<void> {
    const parsed = egressTarget(target);
    if (!parsed) {
      await this.audit({ allowed: false, host: target.slice(0, 255), port: 0, reason: 'malformed target' });
      throw new BerthError(
        'INVALID_INPUT',
        `CONNECT target ${JSON.stringify(target.slice(0, 80))} is not host:port`,
      );
    }
    const { host, port } = parsed;
    const rule = this.policy.rules.find((r) => r.target === `${host}:${port}`);
    if (!rule) {
      await this.audit({ allowed: false, host, port, reason: 'not in the agent egress allowlist' });
      throw new BerthError(
        'EGRESS_DENIED',
        `Agent ${this.policy.agent} may not connect to ${host}:${port} (not in its egress allowlist)`,
      );
    }
    if (Object.keys(rule.headers).length > 0) {
      if (!this.policy.interceptor)
        throw new Error(`no egress interceptor for the header rules of ${rule.target}`);
      this.tunnels.add(client);
      client.once('close', () => this.tunnels.delete(client));
      await this.policy.interceptor.serve(client, head, { host, port, rule }, this.audit);
      return;
    }
    const upstream = await openUpstream(host, port).catch(async (err: Error) => {
      await this.audit({
        allowed: true,
        host,
        port,
        reason: `connect failed: ${err.message}`,
        bytesUp: 0,
        bytesDown: 0,
      });
      throw new BerthError('EGRESS_FAILED', `Connecting to ${host}:${port} failed: ${err.message}`, {
        cause: err,
      });
    });
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    this.tunnels.add(client);
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      this.tunnels.delete(client);
      client.destroy();
      upstream.destroy();
      void this.audit({
        allowed: true,
        host,
        port,
        bytesUp: upstream.bytesWritten,
        bytesDown: upstream.bytesRead,
      });
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Cuts every open tunnel (the sandbox ended or was replaced). */
  closeAll(): void {
    for (const tunnel of this.tunnels) tunnel.destroy();
    this.tunnels.clear();
  }
}

function openUpstream(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, timeout: CONNECT_TIMEOUT_MS });
    socket.once('connect', () => {
      socket.setTimeout(0);
      resolve(socket);
    });
    socket.once('timeout', () => socket.destroy(new Error('timed out')));
    socket.once('error', reject);
  });
}
