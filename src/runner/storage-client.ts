/**
 * The runner's client of the gateway's mediated storage, over the Unix socket.
 * Bodies stream both ways (a workspace file to a put, a get to a workspace file), so an
 * object never has to fit in the runner's memory. A refusal is a GatewayError carrying
 * the gateway's status and error body, as for every other gateway call.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { type ClientRequest, type IncomingMessage, request } from 'node:http';
import { pipeline } from 'node:stream/promises';
import {
  STORAGE_PATH,
  STORAGE_SHA256_HEADER,
  STORAGE_UPDATED_AT_HEADER,
  type StorageEntry,
  type StorageListing,
} from '../core/protocol.js';
import { type GatewayClient, GatewayError } from './gateway-client.js';

/** What a HEAD's bare status means: HEAD answers carry no error body. */
const HEAD_STATUS: Record<number, string> = {
  400: 'STORAGE key is not valid (a relative path of segments, no "." or "..")',
  403: "STORAGE_DENIED: the agent's storage grants do not allow read of this key",
  404: 'STORAGE_OBJECT_NOT_FOUND: there is no such object',
};

export class StorageClient {
  private readonly socketPath: string;
  private readonly token: string;

  constructor(gateway: Pick<GatewayClient, 'socketPath' | 'token'>) {
    this.socketPath = gateway.socketPath;
    this.token = gateway.token;
  }

  async list(prefix: string, after: string): Promise<StorageListing> {
    const query = new URLSearchParams({ prefix, after }).toString();
    const res = await this.send('GET', `${STORAGE_PATH}?${query}`);
    return JSON.parse(await text(res)) as StorageListing;
  }

  async stat(key: string): Promise<StorageEntry> {
    const res = await this.send('HEAD', objectPath(key));
    res.resume();
    return entryOf(key, res);
  }

  /** At most `maxBytes` of the content; `size` is the whole object's. */
  async read(key: string, maxBytes: number): Promise<{ entry: StorageEntry; content: Buffer }> {
    const res = await this.send('GET', objectPath(key));
    const chunks: Buffer[] = [];
    let got = 0;
    for await (const chunk of res as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      got += chunk.length;
      if (got >= maxBytes) break; // leaving the loop destroys the response: the rest is never read
    }
    return { entry: entryOf(key, res), content: Buffer.concat(chunks).subarray(0, maxBytes) };
  }

  /** Streams the object into `file`. */
  async download(key: string, file: string): Promise<StorageEntry> {
    const res = await this.send('GET', objectPath(key));
    await pipeline(res, createWriteStream(file));
    return entryOf(key, res);
  }

  async put(key: string, body: { content: Buffer } | { file: string }): Promise<StorageEntry> {
    const size = 'content' in body ? body.content.length : (await stat(body.file)).size;
    const res = await this.send('PUT', objectPath(key), {
      size,
      write: async (req) => {
        if ('content' in body) req.end(body.content);
        else await pipeline(createReadStream(body.file), req);
      },
    });
    return JSON.parse(await text(res)) as StorageEntry;
  }

  async delete(key: string): Promise<void> {
    await text(await this.send('DELETE', objectPath(key)));
  }

  /** The response once its status is a success; a GatewayError (with the error body) otherwise. */
  private send(
    method: string,
    path: string,
    body?: { size: number; write(req: ClientRequest): Promise<void> },
  ): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          socketPath: this.socketPath,
          method,
          path,
          headers: {
            authorization: `Bearer ${this.token}`,
            ...(body ? { 'content-type': 'application/octet-stream', 'content-length': body.size } : {}),
          },
        },
        (res) => {
          const status = res.statusCode ?? 0;
          if (status < 400) return resolve(res);
          if (method === 'HEAD') {
            res.resume();
            return reject(new GatewayError(status, HEAD_STATUS[status] ?? `HTTP ${status}`));
          }
          text(res).then((t) => reject(new GatewayError(status, t)), reject);
        },
      );
      req.on('error', reject);
      if (body) body.write(req).catch(reject);
      else req.end();
    });
  }
}

function objectPath(key: string): string {
  return `${STORAGE_PATH}/object/${key.split('/').map(encodeURIComponent).join('/')}`;
}

function entryOf(key: string, res: IncomingMessage): StorageEntry {
  return {
    key,
    sha256: String(res.headers[STORAGE_SHA256_HEADER] ?? ''),
    size: Number(res.headers['content-length'] ?? 0),
    updatedAt: Number(res.headers[STORAGE_UPDATED_AT_HEADER] ?? 0),
  };
}

async function text(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}
