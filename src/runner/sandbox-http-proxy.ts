/**
 * The sandbox's HTTP proxy on 127.0.0.1:3128 (HTTP_PROXY/HTTPS_PROXY point here): every
 * outbound connection a tool makes becomes a CONNECT on the gateway socket, carrying this
 * sandbox's token, so the gateway decides and audits it (its allowlist, its generation
 * fence). CONNECT requests (HTTPS) are tunnelled as they are; a plain-HTTP request in
 * absolute form is sent through a tunnel to its host in origin form, one request per
 * connection. The gateway's refusal (403, 409…) is passed back to the tool as is.
 * Node built-ins only; ships into the sandbox.
 */
import { connect, createServer, type Socket } from 'node:net';
import { EGRESS_PROXY_PORT } from '../core/protocol.js';

const MAX_HEAD_BYTES = 64 * 1024;

export function startEgressProxy(gatewaySocket: string, token: string): Promise<void> {
  const server = createServer((client) => {
    client.on('error', () => client.destroy());
    serve(client, gatewaySocket, token).catch(() => client.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(EGRESS_PROXY_PORT, '127.0.0.1', () => resolve());
  });
}

async function serve(client: Socket, gatewaySocket: string, token: string): Promise<void> {
  const { head, rest } = await readHead(client);
  const [requestLine = '', ...headers] = head.split('\r\n');
  const [method = '', target = ''] = requestLine.split(' ');
  let authority: string;
  let forward: Buffer;
  if (method === 'CONNECT') {
    authority = target;
    forward = rest;
  } else {
    const url = URL.canParse(target) ? new URL(target) : null;
    if (url?.protocol !== 'http:') {
      client.end(
        'HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\nberth proxy: absolute http:// URLs or CONNECT only\n',
      );
      return;
    }
    authority = `${url.hostname}:${url.port || 80}`;
    const kept = headers.filter((h) => !/^(proxy-[a-z-]*|connection|keep-alive)\s*:/i.test(h));
    const request = [`${method} ${url.pathname}${url.search} HTTP/1.1`, ...kept, 'connection: close', '', ''];
    forward = Buffer.concat([Buffer.from(request.join('\r\n')), rest]);
  }
  const gateway = connect({ path: gatewaySocket });
  gateway.on('error', () => client.destroy());
  gateway.write(
    `CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\nauthorization: Bearer ${token}\r\n\r\n`,
  );
  const answer = await readHead(gateway);
  if (!/^HTTP\/1\.1 200 /.test(answer.head)) {
    // The gateway's refusal, body and all (it closes the connection after it).
    client.write(Buffer.concat([Buffer.from(`${answer.head}\r\n\r\n`), answer.rest]));
    gateway.pipe(client);
    return;
  }
  if (method === 'CONNECT') client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  if (forward.length > 0) gateway.write(forward);
  if (answer.rest.length > 0) client.write(answer.rest);
  const close = () => {
    client.destroy();
    gateway.destroy();
  };
  client.on('close', close);
  gateway.on('close', close);
  client.pipe(gateway);
  gateway.pipe(client);
}

/** Reads up to the end of an HTTP head; the bytes after it are returned, the stream left paused. */
function readHead(socket: Socket): Promise<{ head: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end >= 0) {
        done();
        socket.pause();
        resolve({ head: buffered.subarray(0, end).toString('latin1'), rest: buffered.subarray(end + 4) });
      } else if (buffered.length > MAX_HEAD_BYTES) {
        done();
        reject(new Error('HTTP head too large'));
      }
    };
    const onEnd = () => {
      done();
      reject(new Error('connection closed before the HTTP head ended'));
    };
    const done = () => {
      socket.off('data', onData);
      socket.off('end', onEnd);
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
  });
}
