/**
 * A WHATWG `fetch` over the gateway's Unix socket, for the model SDKs (both accept a
 * custom fetch): the sandbox has no network, and this keeps the runner free of an HTTP
 * client dependency. The URL's host is ignored; its path and query go to the gateway.
 * The response body streams (Server-Sent Events arrive as the gateway forwards them);
 * an abort signal destroys the request and its response.
 */
import { request } from 'node:http';
import { Readable } from 'node:stream';

export function socketFetch(socketPath: string): typeof fetch {
  return async (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const method = init?.method ?? 'GET';
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, key) => {
      headers[key] = value;
    });
    const body = init?.body == null ? undefined : Buffer.from(await new Response(init.body).arrayBuffer());
    if (body) headers['content-length'] = String(body.length);
    const signal = init?.signal ?? undefined;
    signal?.throwIfAborted();
    return new Promise<Response>((resolve, reject) => {
      const req = request({ socketPath, method, path: url.pathname + url.search, headers }, (res) => {
        const status = res.statusCode ?? 0;
        const responseHeaders = new Headers();
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2)
          responseHeaders.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
        const noBody = status === 204 || status === 304 || method === 'HEAD';
        if (noBody) res.resume();
        resolve(
          new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status,
            headers: responseHeaders,
          }),
        );
      });
      const onAbort = () => {
        const reason = signal?.reason ?? new DOMException('The operation was aborted', 'AbortError');
        req.destroy(reason instanceof Error ? reason : new Error(String(reason)));
        reject(reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      req.on('close', () => signal?.removeEventListener('abort', onAbort));
      req.on('error', reject);
      req.end(body);
    });
  };
}
