/**
 * The SDK's transport: JSON requests with the bearer token, and a Server-Sent Events
 * reader. An API error comes back as a BerthError with the API's code, message and hint;
 * a host that does not answer is HOST_UNREACHABLE naming the URL.
 */
import {
  BerthError,
  backoffMs,
  ERRORS,
  type ErrorCode,
  type ExecLine,
  type ExecRequest,
  sleep,
} from '../core/index.js';

export interface StreamedEvent {
  /** null for events the server computes on the fly (a moved queue position). */
  id: number | null;
  type: string;
  data: Record<string, unknown>;
}

/** How long `exec` sends again while the API answers SANDBOX_UNREACHABLE (nothing ran), and how it spaces its tries. */
const EXEC_RETRY_MS = 10_000;
const EXEC_RETRY_BACKOFF = { firstMs: 250, maxMs: 2000 };

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** The transport under `Berth`; also usable alone for raw routes (the CLI and tests do). */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    private readonly token?: string,
  ) {}

  async request<T>(method: HttpMethod, path: string, body?: unknown): Promise<T> {
    const res = await this.fetch(path, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw apiError(res.status, errorBody(text));
    return (text ? JSON.parse(text) : null) as T;
  }

  /** A GET whose answer may be JSON or bytes (a file): the content type, the headers, and the body as bytes. */
  /**
   * Every item of a keyset listing (GET `path` answers `{[field]: T[], next}`), following
   * `next` page after page.
   */
  async all<T>(path: string, field: string): Promise<T[]> {
    const items: T[] = [];
    let next: string | null = null;
    do {
      const sep = path.includes('?') ? '&' : '?';
      const page: Record<string, unknown> & { next: string | null } = await this.request(
        'GET',
        next === null ? path : `${path}${sep}${new URLSearchParams({ after: next })}`,
      );
      items.push(...(page[field] as T[]));
      next = page.next;
    } while (next !== null);
    return items;
  }

  /** Any request, its answer as it comes (a stream of bytes in or out); an answer other than 2xx throws its API error. */
  async send(path: string, init: RequestInit): Promise<Response> {
    const res = await this.fetch(path, init);
    if (!res.ok) throw apiError(res.status, errorBody(await res.text()));
    return res;
  }

  async requestBytes(path: string): Promise<{ contentType: string; headers: Headers; bytes: Buffer }> {
    const res = await this.fetch(path, { method: 'GET' });
    const bytes = Buffer.from(await res.arrayBuffer());
    if (!res.ok) {
      throw apiError(res.status, errorBody(bytes.toString('utf8')));
    }
    return { contentType: res.headers.get('content-type') ?? '', headers: res.headers, bytes };
  }

  /** A session's events after event id `after`, until the consumer stops or `signal` aborts. */
  events(sessionId: string, after: number, signal?: AbortSignal): AsyncGenerator<StreamedEvent> {
    return this.stream(`/v1/sessions/${encodeURIComponent(sessionId)}/events`, after, signal);
  }

  /** Yields the events of an SSE route after event id `after` until the consumer stops or `signal` aborts. */
  async *stream(path: string, after: number, signal?: AbortSignal): AsyncGenerator<StreamedEvent> {
    const res = await this.fetch(`${path}?after=${after}`, {
      headers: { accept: 'text/event-stream' },
      signal,
    });
    if (!res.ok || !res.body) throw apiError(res.status, await res.json().catch(() => null));
    for await (const block of blocks(res.body, this.baseUrl, '\n\n')) {
      const event = parseSseBlock(block);
      if (event) yield event;
    }
  }

  /**
   * Runs a command in the session's live sandbox; yields its lines as they come (stdout,
   * stderr, then one exit or error line). Aborting `signal` ends the command. A request
   * refused SANDBOX_UNREACHABLE (the command did not start) is sent again, with backoff,
   * for `retryForMs`.
   */
  async *exec(
    sessionId: string,
    body: ExecRequest,
    signal?: AbortSignal,
    retryForMs = EXEC_RETRY_MS,
  ): AsyncGenerator<ExecLine> {
    const deadline = Date.now() + retryForMs;
    for (let tries = 1; ; tries++) {
      const res = await this.fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/exec`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal,
      });
      if (res.ok && res.body) {
        for await (const line of blocks(res.body, this.baseUrl, '\n'))
          if (line !== '') yield JSON.parse(line) as ExecLine;
        return;
      }
      const error = apiError(res.status, errorBody(await res.text()));
      // Refused before the command started (the worker's row lags a take-over, or its worker restarts): safe to send again.
      const waitMs = backoffMs(tries, EXEC_RETRY_BACKOFF);
      if (error.code !== 'SANDBOX_UNREACHABLE' || Date.now() + waitMs > deadline) throw error;
      await sleep(waitMs, signal);
    }
  }

  private async fetch(path: string, init: RequestInit): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.token) headers.set('authorization', `Bearer ${this.token}`);
    try {
      return await fetch(new URL(path, this.baseUrl), { ...init, headers });
    } catch (err) {
      if ((err as Error).name === 'AbortError' || (err as Error).name === 'TimeoutError') throw err;
      throw new BerthError('HOST_UNREACHABLE', `No berth host answers at ${this.baseUrl}`, { cause: err });
    }
  }
}

/** The body's text in blocks, each ended by `separator`, as they come; the body is cancelled when the reader stops. */
async function* blocks(
  body: ReadableStream<Uint8Array>,
  baseUrl: string,
  separator: string,
): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of readBody(body, baseUrl)) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let end = buffer.indexOf(separator); end >= 0; end = buffer.indexOf(separator)) {
        yield buffer.slice(0, end);
        buffer = buffer.slice(end + separator.length);
      }
    }
  } finally {
    await body.cancel().catch(() => undefined);
  }
}

/** A response body whose connection breaks mid-way throws HOST_UNREACHABLE, like a request that finds no host. */
async function* readBody(body: ReadableStream<Uint8Array>, baseUrl: string): AsyncGenerator<Uint8Array> {
  try {
    yield* body as unknown as AsyncIterable<Uint8Array>;
  } catch (err) {
    if ((err as Error).name === 'AbortError' || (err as Error).name === 'TimeoutError') throw err;
    throw new BerthError('HOST_UNREACHABLE', `The connection to ${baseUrl} broke mid-stream`, { cause: err });
  }
}

export function parseSseBlock(block: string): StreamedEvent | null {
  let id: number | null = null;
  let type = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':') || line === '') continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') id = Number(value);
    else if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return null;
  return { id, type, data: JSON.parse(data.join('\n')) as Record<string, unknown> };
}

/** An error answer's JSON; null for none, or for a page a proxy in front of berth wrote. */
function errorBody(text: string): unknown {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

function apiError(status: number, json: unknown): BerthError {
  const e = (json as { error?: { code?: string; message?: string; hint?: string } } | null)?.error;
  // A balancer in front of berth answers 502–504 itself when no host behind it answers.
  if (!e?.code && status >= 502 && status <= 504)
    return new BerthError(
      'HOST_UNREACHABLE',
      `No berth host answers behind the load balancer (HTTP ${status})`,
    );
  const code = (e?.code && e.code in ERRORS ? e.code : 'INTERNAL') as ErrorCode;
  return new BerthError(code, e?.message ?? `API answered ${status}`, e?.hint ? { hint: e.hint } : undefined);
}
