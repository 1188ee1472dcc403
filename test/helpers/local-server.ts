/** A test's fake platform server on a free loopback port: its base URL, and its close. */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on 127.0.0.1 at a free port; resolves to `http://127.0.0.1:<port><path>`. */
export async function listenLocal(server: Server, path = ''): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
}

/** Closes the server now, cutting kept-alive and long-polling requests. */
export function closeLocal(server: Server): void {
  server.closeAllConnections();
  server.close();
}
