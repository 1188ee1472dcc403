/**
 * The gateway's mediated storage, `/v1/storage`: an agent's persistent objects,
 * reached by its sandboxes through this narrow API only (the contents are in the blob
 * store, a dir of the host or an S3 bucket, never mounted into a sandbox).
 *
 * Invariants:
 * - Every call is checked against the agent's grants, read from the store on that call
 *   (a revoke takes effect at once), and audited: allowed or denied, with the key, the
 *   bytes moved and the error, if any.
 * - An agent reaches its own namespace only: reads and listings name the bound agent,
 *   and a put or delete records its row in the namespace of the fenced session's agent.
 * - Writes are fenced: the row is written in one store transaction that checks the
 *   sandbox's generation and this worker's lease; a stale put leaves its blob as garbage
 *   and nothing visible. Bodies stream both ways; nothing holds a whole object in memory.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import { type BlobStore, StorageBlobs } from '../blobs/index.js';
import {
  assertStorageKey,
  BerthError,
  type Clock,
  decideStorageAccess,
  STORAGE_PATH,
  STORAGE_SHA256_HEADER,
  STORAGE_UPDATED_AT_HEADER,
  type StorageOp,
  storageEntryOf,
  storageListingOf,
} from '../core/index.js';
import { type Fence, fenceError, type GatewayStore } from '../store/index.js';
import { sendJson } from './http-json.js';

const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;
const SHA256_HEX = /^[0-9a-f]{64}$/;
/** The operation each method is on an object, as audited, and the grant op it needs. */
const OBJECT_CALLS: Record<string, { op: string; needs: StorageOp }> = {
  GET: { op: 'get', needs: 'read' },
  HEAD: { op: 'stat', needs: 'read' },
  PUT: { op: 'put', needs: 'write' },
  DELETE: { op: 'delete', needs: 'delete' },
};

export interface StorageRoutesOptions {
  /** The bound session's agent: the namespace and the grants of every call. */
  agent: string;
  binding: Fence;
  store: GatewayStore;
  /** Where object contents live (mediated storage's blobs: storage-blobs.ts). */
  blobs: BlobStore;
  /** Largest object a put may store, in bytes. */
  maxObjectBytes: number;
  clock: Clock;
  log: Logger;
}

/** What one call did, for its audit row. */
interface CallRecord {
  op: string;
  /** As sent (percent-encoded, cut) when it is not a valid key. */
  key?: string;
  prefix?: string;
  bytes: number;
  /** Why the call was refused: no grant covers it, or its key breaks a rule. */
  denied?: string;
}

export class StorageRoutes {
  private readonly contents: StorageBlobs;

  constructor(private readonly o: StorageRoutesOptions) {
    this.contents = new StorageBlobs(o.blobs);
  }

  /** `url` is the request's path and query (under STORAGE_PATH). */
  async handle(req: IncomingMessage, res: ServerResponse, url: string): Promise<void> {
    const [path = '', query = ''] = url.split('?', 2) as [string, string?];
    const call: CallRecord = { op: req.method ?? '', bytes: 0 };
    try {
      if (path === STORAGE_PATH && req.method === 'GET') return await this.list(res, query, call);
      const objectPath = `${STORAGE_PATH}/object/`;
      const objectCall = OBJECT_CALLS[req.method ?? ''];
      if (!path.startsWith(objectPath) || !objectCall)
        throw new BerthError('NOT_FOUND', `No storage route ${req.method} ${path}`, {
          hint: `Use GET ${STORAGE_PATH}?prefix=… or GET/HEAD/PUT/DELETE ${objectPath}<key>.`,
        });
      call.op = objectCall.op;
      const encoded = path.slice(objectPath.length);
      try {
        call.key = decodeKey(encoded);
      } catch (err) {
        // A key trying to leave the namespace is a refusal worth an audit of what was sent.
        call.key = encoded.slice(0, 200);
        call.denied = (err as Error).message;
        throw err;
      }
      await this.check(objectCall.needs, call.key, call);
      if (req.method === 'PUT') return await this.put(req, res, call.key, call);
      if (req.method === 'DELETE') return await this.delete(res, call.key, call);
      return await this.get(req, res, call.key, call);
    } catch (err) {
      await this.audit(call, err);
      throw err;
    }
  }

  private async list(res: ServerResponse, query: string, call: CallRecord): Promise<void> {
    const params = new URLSearchParams(query);
    const prefix = params.get('prefix') ?? '';
    const after = params.get('after') ?? '';
    const limit = Number(params.get('limit') ?? DEFAULT_PAGE);
    call.op = 'list';
    call.prefix = prefix;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
      throw new BerthError('INVALID_INPUT', `Storage listing limit must be an integer from 1 to ${MAX_PAGE}`);
    await this.check('list', prefix, call);
    const rows = await this.o.store.listStorageObjects(this.o.agent, { prefix, after, limit: limit + 1 });
    await this.audit(call);
    sendJson(res, 200, storageListingOf(rows, limit));
  }

  /** GET streams the content (one `Range: bytes=a-b` honoured); HEAD is the stat. */
  private async get(req: IncomingMessage, res: ServerResponse, key: string, call: CallRecord): Promise<void> {
    const object = await this.o.store.getStorageObject(this.o.agent, key);
    if (!object) throw notFound(key, call.op);
    const headers: Record<string, string | number> = {
      'content-type': 'application/octet-stream',
      'accept-ranges': 'bytes',
      [STORAGE_SHA256_HEADER]: object.sha256,
      [STORAGE_UPDATED_AT_HEADER]: object.updatedAt,
    };
    if (req.method === 'HEAD') {
      await this.audit(call);
      res.writeHead(200, { ...headers, 'content-length': object.size }).end();
      return;
    }
    const range = parseRange(req.headers.range, object.size);
    const stream = await this.contents.read(object.blob, range ?? undefined);
    call.bytes = range ? range.end - range.start + 1 : object.size;
    await this.audit(call);
    res.writeHead(range ? 206 : 200, {
      ...headers,
      'content-length': call.bytes,
      ...(range ? { 'content-range': `bytes ${range.start}-${range.end}/${object.size}` } : {}),
    });
    // Headers are out: a failure now can only cut the connection.
    await pipeline(stream, res).catch((err: unknown) => {
      this.o.log.warn({ err, key }, 'Storage read cut');
    });
  }

  private async put(req: IncomingMessage, res: ServerResponse, key: string, call: CallRecord): Promise<void> {
    const { maxObjectBytes } = this.o;
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > maxObjectBytes)
      throw new BerthError(
        'STORAGE_OBJECT_TOO_LARGE',
        `Storage object ${key} of ${declared} bytes is over ${maxObjectBytes} bytes (put)`,
      );
    const expected = req.headers[STORAGE_SHA256_HEADER];
    if (expected !== undefined && (typeof expected !== 'string' || !SHA256_HEX.test(expected)))
      throw new BerthError(
        'INVALID_INPUT',
        `Header ${STORAGE_SHA256_HEADER} must be 64 lowercase hex digits`,
      );
    const written = await this.contents.write(req as AsyncIterable<Buffer>, {
      maxBytes: maxObjectBytes,
      ...(expected ? { expectedSha256: expected } : {}),
    });
    call.bytes = written.size;
    const now = this.o.clock.now();
    const put = await this.o.store.putStorageObject({ ...this.o.binding, key, ...written }, now);
    if (put.code !== 'ok') throw fenceError(put.code, this.o.binding, 'putStorageObject');
    await this.audit(call);
    sendJson(res, 200, storageEntryOf(put.value));
  }

  private async delete(res: ServerResponse, key: string, call: CallRecord): Promise<void> {
    const deleted = await this.o.store.deleteStorageObject({ ...this.o.binding, key });
    if (deleted.code !== 'ok') throw fenceError(deleted.code, this.o.binding, 'deleteStorageObject');
    if (!deleted.value) throw notFound(key, 'delete');
    await this.audit(call);
    sendJson(res, 200, { key, deleted: true });
  }

  /** The agent's grants, as the store has them now; STORAGE_DENIED when none covers the call. */
  private async check(op: StorageOp, target: string, call: CallRecord): Promise<void> {
    const grants = await this.o.store.listStorageGrants(this.o.agent);
    const decision = decideStorageAccess(grants, op, target);
    if (decision.action === 'allow') return;
    call.denied = decision.reason;
    throw new BerthError(
      'STORAGE_DENIED',
      `Agent ${this.o.agent} may not ${call.op} in storage: ${decision.reason}`,
    );
  }

  /** One audit row per call; never throws (the call's own outcome is what the sandbox gets). */
  private async audit(call: CallRecord, err?: unknown): Promise<void> {
    const { binding, agent } = this.o;
    const denied = call.denied !== undefined;
    const data = {
      agent,
      workerId: binding.workerId,
      ...call,
      ...(err ? { error: err instanceof BerthError ? err.code : 'INTERNAL' } : {}),
    };
    this.o.log.info(data, denied ? 'Storage call denied' : 'Storage call');
    try {
      await this.o.store.audit(
        {
          kind: denied ? 'storage-denied' : 'storage-allowed',
          sessionId: binding.sessionId,
          generation: binding.generation,
          data,
        },
        this.o.clock.now(),
      );
    } catch (auditErr) {
      this.o.log.error({ err: auditErr, ...data }, 'Storage audit failed');
    }
  }
}

function notFound(key: string, op: string): BerthError {
  return new BerthError(
    'STORAGE_OBJECT_NOT_FOUND',
    `Storage object ${JSON.stringify(key)} does not exist (${op})`,
  );
}

/** The key from its URL form (percent-encoded), checked against the key rules. */
function decodeKey(encoded: string): string {
  let key: string;
  try {
    key = decodeURIComponent(encoded);
  } catch (err) {
    throw new BerthError('INVALID_INPUT', 'Storage key in the URL is not valid percent-encoding', {
      cause: err,
    });
  }
  return assertStorageKey(key);
}

/** One `bytes=start-end` (or `start-`, or `-suffix`) range within `size`; null = the whole object. */
function parseRange(header: string | undefined, size: number): { start: number; end: number } | null {
  if (header === undefined) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  const fail = () =>
    new BerthError(
      'INVALID_INPUT',
      `Range ${JSON.stringify(header)} is not one satisfiable bytes range of ${size}`,
    );
  if (!m || (m[1] === '' && m[2] === '')) throw fail();
  const start = m[1] === '' ? Math.max(0, size - Number(m[2])) : Number(m[1]);
  const end = m[1] === '' || m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start > end || start >= size) throw fail();
  return { start, end };
}
