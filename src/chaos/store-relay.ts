/**
 * A TCP relay on the host end of a worker's veth to the store's PostgreSQL server: the
 * worker in its network namespace reaches the store through its link only, so cutting
 * that link partitions it from the store, whatever address the database listens on
 * (a throw-away cluster on loopback, or a server elsewhere). A replicated store's URL
 * names several hosts: there is one relay port per host, in the URL's order. The same
 * relay carries a node's S3 traffic (startTcpRelay).
 *
 * Each relay runs in a process of its own (relay-main.ts), not in the chaos driver.
 *
 * Invariants: `close` ends the relay process and resolves once it has exited; a driver
 * that dies leaves none behind (the process exits when its stdin closes); start-up is
 * bounded.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parsePostgresUrl } from '../core/index.js';
import type { Upstream } from './tcp-relay.js';

const RELAY_MAIN = fileURLToPath(new URL('./relay-main.js', import.meta.url));
const START_TIMEOUT_MS = 30_000;

export interface StoreRelay {
  /** The store URL a worker behind this relay uses. */
  url: string;
  close(): Promise<void>;
}

/** Listens on `address` (a free port per host of `storeUrl`) and relays to those hosts. */
export async function startStoreRelay(storeUrl: string, address: string): Promise<StoreRelay> {
  const parsed = parsePostgresUrl(storeUrl);
  const authority = /^([a-z]+:\/\/(?:[^@/?#]*@)?)([^/?#]*)(.*)$/i.exec(storeUrl);
  if (!parsed.ok || !authority || parsed.target.hosts.some((h) => h.host.startsWith('/')))
    throw new Error('--partition-worker needs a store URL with TCP hosts (postgres://user@host:port/db)');
  const relay = await startRelayProcess(parsed.target.hosts, address);
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    url: `${authority[1]}${relay.ports.map((port) => `${host}:${port}`).join(',')}${authority[3]}`,
    close: relay.close,
  };
}

/** A relay of one TCP service (a node's way to the S3 service), listening on a free port of `address`. */
export async function startTcpRelay(
  upstream: Upstream,
  address: string,
): Promise<{ port: number; close(): Promise<void> }> {
  const relay = await startRelayProcess([upstream], address);
  return { port: relay.ports[0]!, close: relay.close };
}

async function startRelayProcess(
  upstreams: Upstream[],
  address: string,
): Promise<{ ports: number[]; close(): Promise<void> }> {
  const child = spawn(process.execPath, [RELAY_MAIN, JSON.stringify({ address, upstreams })], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async () => {
    child.stdin.end();
    child.kill('SIGTERM');
    await exited;
  };
  try {
    const ports = await new Promise<number[]>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(
        () => reject(new Error(`the relay on ${address} did not start`)),
        START_TIMEOUT_MS,
      );
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString('utf8');
        if (!out.includes('\n')) return;
        clearTimeout(timer);
        resolve((JSON.parse(out) as { ports: number[] }).ports);
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the relay on ${address} exited ${code} at start`));
      });
    });
    return { ports, close };
  } catch (err) {
    await close();
    throw err;
  }
}
