/**
 * A TCP relay on the host end of a worker's veth to the store's PostgreSQL server: the
 * worker in its network namespace reaches the store through its link only, so cutting
 * that link partitions it from the store, whatever address the database listens on
 * (a throw-away cluster on loopback, or a server elsewhere).
 *
 * Invariants: one upstream connection per accepted connection; either side ending or
 * failing ends the other (a database restart reaches the worker as a lost connection);
 * `close` ends every connection and the listener.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface StoreRelay {
  /** The store URL a worker behind this relay uses. */
  url: string;
  close(): Promise<void>;
}

/** Listens on `address` (a free port) and relays to the host and port of `storeUrl`. */
export async function startStoreRelay(storeUrl: string, address: string): Promise<StoreRelay> {
  const target = new URL(storeUrl);
  if (!target.hostname)
    throw new Error('--partition-worker needs a store URL with a TCP host (postgres://user@host:port/db)');
  const upstream = { host: target.hostname.replace(/^\[|\]$/g, ''), port: Number(target.port || 5432) };
  const sockets = new Set<Socket>();
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
  const relayed = new URL(storeUrl);
  relayed.hostname = address;
  relayed.port = String((server.address() as { port: number }).port);
  return {
    url: relayed.toString(),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
