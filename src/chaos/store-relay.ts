/**
 * A TCP relay on the host end of a worker's veth to the store's PostgreSQL server: the
 * worker in its network namespace reaches the store through its link only, so cutting
 * that link partitions it from the store, whatever address the database listens on
 * (a throw-away cluster on loopback, or a server elsewhere). A replicated store's URL
 * names several hosts: there is one relay port per host, in the URL's order.
 *
 * The same relay carries a node's S3 traffic (startTcpRelay).
 *
 * Invariants: one upstream connection per accepted connection; either side ending or
 * failing ends the other (a database restart reaches the worker as a lost connection);
 * `close` ends every connection and the listeners.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { parsePostgresUrl } from '../core/index.js';

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
  const sockets = new Set<Socket>();
  const servers: Server[] = [];
  const close = async () => {
    for (const s of sockets) s.destroy();
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  };
  try {
    for (const upstream of parsed.target.hosts) servers.push(await relayTo(upstream, address, sockets));
  } catch (err) {
    await close();
    throw err;
  }
  const ports = servers.map((server) => (server.address() as { port: number }).port);
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    url: `${authority[1]}${ports.map((port) => `${host}:${port}`).join(',')}${authority[3]}`,
    close,
  };
}

/**
 * A relay of one TCP service (a node's way to the S3 service): listens on `address` (a free
 * port) and relays to `upstream`; `close` ends every connection and the listener.
 */
export async function startTcpRelay(
  upstream: { host: string; port: number },
  address: string,
): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = await relayTo(upstream, address, sockets);
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

async function relayTo(upstream: { host: string; port: number }, address: string, sockets: Set<Socket>) {
  const track = (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  const server: Server = createServer((down) => {
    const up = connect(upstream);
    track(down);
    track(up);
    down.pipe(up);
    up.pipe(down);
    down.once('error', () => up.destroy());
    up.once('error', () => down.destroy());
    down.once('close', () => up.destroy());
    up.once('close', () => down.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, address, resolve);
  });
  return server;
}
