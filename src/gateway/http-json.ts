/** JSON in and out of the gateway's HTTP doors (the sandbox API, the model proxy, storage). */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BerthError } from '../core/index.js';

/**
 * The whole body as JSON ({} when empty): MESSAGE_TOO_LARGE past maxBytes (read no
 * further), INVALID_INPUT when it is not JSON. `door` names the caller in the messages.
 */
export async function readJson(req: IncomingMessage, maxBytes: number, door: string): Promise<unknown> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes)
      throw new BerthError('MESSAGE_TOO_LARGE', `${door} request body over ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  try {
    return chunks.length === 0 ? {} : JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw new BerthError('INVALID_INPUT', `${door} request body is not valid JSON`, { cause: err });
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res
    .writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...headers,
    })
    .end(text);
}
