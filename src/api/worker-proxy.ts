/**
 * The API's side of the control path (docs/sandbox-api.md): an operation on a session's
 * live sandbox goes to the worker that holds it, over HTTP to that worker's control
 * endpoint (the API never imports the worker), with the worker's key and the binding's
 * fence. What the store says may lag the worker by a report (about a second): the worker
 * fences, and a refusal or no answer is SANDBOX_UNREACHABLE (retryable), never a guess.
 */
import { Readable } from 'node:stream';
import { request } from 'undici';
import {
  BerthError,
  type ErrorCode,
  FENCE_HEADER,
  type LiveSandbox,
  type SessionView,
} from '../core/index.js';
import type { ApiStore } from '../store/index.js';

/** How long the worker may take to answer the request (its headers; the stream after is the command's). */
const HEADERS_TIMEOUT_MS = 10_000;

/**
 * The sandbox bound to the session now and a fresh row of its worker: NO_LIVE_SANDBOX when
 * none is bound, SANDBOX_UNREACHABLE when its worker's row is stale or serves no control
 * endpoint. `op` names the operation in the messages.
 */
export async function liveSandboxOf(
  store: Pick<ApiStore, 'liveSandboxOf'>,
  view: SessionView,
  now: number,
  leaseMs: number,
  op: string,
): Promise<ReachableSandbox> {
  const live = await store.liveSandboxOf(view.id);
  if (!live)
    throw new BerthError(
      'NO_LIVE_SANDBOX',
      `Session ${view.id} has no sandbox bound to it now (status ${view.status}) (${op}): a resident agent's session keeps one between turns; an ephemeral one has one only while a turn runs`,
    );
  const { control } = live;
  if (!control || now - live.workerHeartbeatAt > leaseMs)
    throw new BerthError(
      'SANDBOX_UNREACHABLE',
      `Worker ${live.workerId} holding session ${view.id}'s sandbox ${control ? 'has not renewed its row for a lease' : 'serves no control endpoint'} (${op})`,
    );
  return { ...live, control };
}

export type ReachableSandbox = LiveSandbox & { control: NonNullable<LiveSandbox['control']> };

/** A request to the worker's control endpoint, on the session's path there (the API's path, the same). */
export interface WorkerCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Path and query string. */
  path: string;
  /** JSON (an object) or bytes streamed. */
  body?: object | Readable;
  /** Names the operation in the messages. */
  op: string;
}

/**
 * Sends `call` to the worker's control endpoint; resolves with its answer once the worker
 * accepted (2xx: its status, content length and body). Its refusals become catalogue
 * errors: a fence refusal or a wrong key (the store lags the worker, or the worker
 * restarted) and no answer are SANDBOX_UNREACHABLE; the worker's own codes pass through.
 */
export async function callWorker(
  live: ReachableSandbox,
  sessionId: string,
  call: WorkerCall,
  signal: AbortSignal,
): Promise<{ status: number; length: number | null; body: Readable }> {
  const unreachable = (why: string, cause?: unknown) =>
    new BerthError(
      'SANDBOX_UNREACHABLE',
      `Worker ${live.workerId} holding session ${sessionId}'s sandbox ${why} (${call.op})`,
      { cause },
    );
  const { body } = call;
  const streamed = body instanceof Readable;
  // A request that fails destroys the body with its error, which the rejection below reports.
  if (streamed) body.on('error', () => undefined);
  let res: Awaited<ReturnType<typeof request>>;
  try {
    res = await request(`${live.control.url}${call.path}`, {
      method: call.method,
      headers: {
        authorization: `Bearer ${live.control.key}`,
        [FENCE_HEADER]: `${sessionId}.${live.generation}`,
        ...(body === undefined
          ? {}
          : { 'content-type': streamed ? 'application/octet-stream' : 'application/json' }),
      },
      ...(body === undefined ? {} : { body: streamed ? body : JSON.stringify(body) }),
      signal,
      headersTimeout: HEADERS_TIMEOUT_MS,
      bodyTimeout: 0,
    });
  } catch (err) {
    throw unreachable(`did not answer: ${(err as Error).message}`, err);
  }
  if (res.statusCode >= 200 && res.statusCode < 300) {
    const length = Number(res.headers['content-length']);
    return {
      status: res.statusCode,
      length: Number.isFinite(length) ? length : null,
      body: Readable.from(res.body),
    };
  }
  const text = await res.body.text().catch(() => '');
  const refused = parseError(text);
  // The key and the fence are the control path's own: the store lagged the worker, not the caller's fault.
  if (!refused || refused.code === 'STALE_GENERATION' || refused.code === 'UNAUTHORIZED')
    throw unreachable(`refused it (${res.statusCode} ${refused?.code ?? text.slice(0, 200)})`);
  throw new BerthError(refused.code, refused.message);
}
function parseError(text: string): { code: ErrorCode; message: string } | null {
  try {
    const { error } = JSON.parse(text) as { error?: { code?: ErrorCode; message?: string } };
    return error?.code && error.message ? { code: error.code, message: error.message } : null;
  } catch {
    return null;
  }
}
