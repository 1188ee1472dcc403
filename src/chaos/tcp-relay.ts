/**
 * TCP relay servers: each listens on an address (a free port) and joins every connection
 * it accepts to a new connection to its upstream. Run inside the relay process
 * (relay-main.ts), never in the chaos driver.
 *
 * Invariants: one upstream connection per accepted connection; either side ending or
 * failing ends the other (a database or S3 daemon restart reaches the client as a lost
 * connection); `close` ends every connection and the listeners.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface Upstream {
  host: string;
  port: number;
}

/** One listening server per upstream, in order; their ports, and a close of them all. */
export async function relayServers(
  upstreams: Upstream[],
  address: string,
): Promise<{ ports: number[]; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const servers: Server[] = [];
  const close = async () => {
    for (const s of sockets) s.destroy();
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  };
  try {
    for (const upstream of upstreams) servers.push(await relayTo(upstream, address, sockets));
  } catch (err) {
    await close();
    throw err;
  }
  return { ports: servers.map((server) => (server.address() as { port: number }).port), close };
}

async function relayTo(upstream: Upstream, address: string, sockets: Set<Socket>): Promise<Server> {
  const track = (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  const server: Server = createServer((down) => {
    const up = connect(upstream);
    track(down);
    track(up);
    down.setNoDelay(true);
    up.setNoDelay(true);
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
