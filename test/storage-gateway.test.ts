/**
 * Mediated storage at the gateway: a real gateway on a Unix socket, a real
 * SQLite store and blob files in a temp data dir; calls made over HTTP as a sandbox makes
 * them, with the runner's own storage client and tools where they apply. The blob store
 * is the file backend here; test/blobs.conformance.test.ts runs both backends.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { type TestContext, test } from 'node:test';
import { pino } from 'pino';
import { BLOB_GRACE_MS, FileBlobStore, StorageBlobs } from '../src/blobs/index.js';
import { agentSpecSchema, type StorageOp, systemClock } from '../src/core/index.js';
import { SandboxGateway, StorageRoutes, signSandboxToken } from '../src/gateway/index.js';
import { GatewayClient, GatewayError } from '../src/runner/gateway-client.js';
import { StorageClient } from '../src/runner/storage-client.js';
import { runTool, type ToolContext } from '../src/runner/tools.js';
import { type Fence, openSqliteStore } from '../src/store/index.js';
import { testLifecycle } from './helpers/lifecycle.js';

const SECRET = Buffer.from('s'.repeat(32));
const MiB = 1024 * 1024;

/** Agents `a` (bound to the gateway, session `s`) and `b` (session `t`), both claimed by worker w1. */
async function startStorage(t: TestContext, grants: { prefix: string; ops: StorageOp[] }[]) {
  const dir = await mkdtemp(join(tmpdir(), 'berth-storage-'));
  const store = openSqliteStore({
    path: ':memory:',
    leaseMs: 10_000,
    retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 },
  });
  const now = Date.now();
  for (const name of ['a', 'b'])
    await store.createAgent(agentSpecSchema.parse({ name, provider: 'command' }), now);
  await store.registerWorker({ id: 'w1', host: 'h', pid: 1, slots: 2, heartbeatAt: now, startedAt: now });
  const fences: Fence[] = [];
  for (const [sessionId, agent] of [
    ['s', 'a'],
    ['t', 'b'],
  ] as const) {
    await store.enqueueMessage({ sessionId, agent, text: 'x', now });
    const claim = (await store.claimRunnableSession('w1', now))!;
    fences.push({ sessionId, generation: claim.session.generation, workerId: 'w1' });
  }
  const [fence, otherFence] = fences as [Fence, Fence];
  for (const grant of grants) await store.grantStorage({ agent: 'a', ...grant }, now);
  const blobs = new FileBlobStore(join(dir, 'blobs'));
  await blobs.check();
  const storageBlobs = new StorageBlobs(blobs);
  const log = pino({ level: 'silent' });
  const socketPath = join(dir, 'gateway.sock');
  const lifecycle = testLifecycle('storage-gateway-test');
  const gateway = new SandboxGateway({
    lifecycle,
    socketPath,
    bootToken: 'boot',
    secret: SECRET,
    store,
    clock: systemClock,
    log,
    maxBodyBytes: 4096,
  });
  await gateway.listen();
  const tokenFor = (generation: number) =>
    signSandboxToken(SECRET, { sessionId: 's', generation, expiresAt: now + 60_000 });
  const token = tokenFor(fence.generation);
  const routes = { store, blobs, maxObjectBytes: 64 * MiB, clock: systemClock, log };
  gateway.bind({
    fence,
    assignment: { sessionId: 's', generation: fence.generation, token, heartbeatIntervalMs: 2000 },
    log,
    hooks: {
      onHeartbeat: () => {},
      beforeCommit: async () => undefined,
      checkpoint: () => Promise.reject(new Error('no checkpoints in this test')),
      checkpointModelCall: async () => null,
    },
    storage: new StorageRoutes({ ...routes, agent: 'a', binding: fence }),
  });
  t.after(async () => {
    await gateway.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const gatewayClient = new GatewayClient(socketPath, token);
  const client = new StorageClient(gatewayClient);
  /** A raw call: the path exactly as given (no normalisation), for what a client library would not send. */
  const raw = (method: string, path: string, as = token) =>
    new Promise<{ status: number; code: string | undefined }>((resolve, reject) => {
      const req = request({ socketPath, method, path, headers: { authorization: `Bearer ${as}` } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode!, code: text ? JSON.parse(text).error?.code : undefined });
        });
      });
      req.on('error', reject);
      req.end();
    });
  const audit = async () => (await store.listAudit(0, 1000)).filter((e) => e.kind.startsWith('storage-'));
  return {
    dir,
    store,
    storageBlobs,
    fence,
    otherFence,
    client,
    gatewayClient,
    raw,
    tokenFor,
    audit,
    socketPath,
  };
}

/** The status and catalogue code a storage call was refused with. */
async function refusal(call: Promise<unknown>): Promise<string> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    return `${err.status} ${err.body.startsWith('{') ? JSON.parse(err.body).error.code : err.body}`;
  }
  return 'allowed';
}

test('storage: granted calls work end to end; hashes are checked; every call is audited', async (t) => {
  const { client, audit, socketPath, fence } = await startStorage(t, [
    { prefix: 'photos/', ops: ['read', 'list', 'write', 'delete'] },
  ]);
  const put = await client.put('photos/a b.txt', { content: Buffer.from('hello storage') });
  const sha256 = createHash('sha256').update('hello storage').digest('hex');
  assert.deepEqual({ ...put, updatedAt: 0 }, { key: 'photos/a b.txt', sha256, size: 13, updatedAt: 0 });
  assert.equal((await client.read('photos/a b.txt', 100)).content.toString(), 'hello storage');
  assert.equal((await client.read('photos/a b.txt', 5)).content.toString(), 'hello', 'a bounded read');
  assert.deepEqual(await client.stat('photos/a b.txt'), put);
  assert.deepEqual(await client.list('photos/', ''), { objects: [put], next: null });

  // A put sent with the hash of other content stores nothing.
  const mismatch = await new Promise<number>((resolve, reject) => {
    const headers = { authorization: `Bearer ${token(fence)}`, 'x-berth-sha256': 'f'.repeat(64) };
    const req = request(
      { socketPath, method: 'PUT', path: '/v1/storage/object/photos/h', headers },
      (res) => {
        res.resume();
        resolve(res.statusCode!);
      },
    );
    req.on('error', reject);
    req.end('some bytes');
  });
  assert.equal(mismatch, 400);
  assert.equal(
    await refusal(client.stat('photos/h')),
    '404 STORAGE_OBJECT_NOT_FOUND: there is no such object',
  );

  // A ranged read.
  const ranged = await new Promise<{ status: number; body: string; range: string }>((resolve, reject) => {
    const headers = { authorization: `Bearer ${token(fence)}`, range: 'bytes=6-12' };
    const req = request({ socketPath, path: `/v1/storage/object/photos/a%20b.txt`, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          body: Buffer.concat(chunks).toString(),
          range: String(res.headers['content-range']),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
  assert.deepEqual(ranged, { status: 206, body: 'storage', range: 'bytes 6-12/13' });

  await client.delete('photos/a b.txt');
  assert.equal(await refusal(client.delete('photos/a b.txt')), '404 STORAGE_OBJECT_NOT_FOUND');
  assert.deepEqual(
    (await audit()).map((e) => [e.kind, e.data.op, e.data.error ?? 'ok']),
    [
      ['storage-allowed', 'put', 'ok'],
      ['storage-allowed', 'get', 'ok'],
      ['storage-allowed', 'get', 'ok'],
      ['storage-allowed', 'stat', 'ok'],
      ['storage-allowed', 'list', 'ok'],
      ['storage-allowed', 'put', 'STORAGE_HASH_MISMATCH'],
      ['storage-allowed', 'stat', 'STORAGE_OBJECT_NOT_FOUND'],
      ['storage-allowed', 'get', 'ok'],
      ['storage-allowed', 'delete', 'ok'],
      ['storage-allowed', 'delete', 'STORAGE_OBJECT_NOT_FOUND'],
    ],
  );
  const first = (await audit())[0]!;
  assert.deepEqual(
    { session: first.sessionId, generation: first.generation, agent: first.data.agent, key: first.data.key },
    { session: 's', generation: fence.generation, agent: 'a', key: 'photos/a b.txt' },
  );
  assert.equal(first.data.bytes, 13);
});

/** The sandbox token of the bound session `s`. */
function token(fence: Fence): string {
  return signSandboxToken(SECRET, {
    sessionId: 's',
    generation: fence.generation,
    expiresAt: Date.now() + 60_000,
  });
}

test('storage: ops and prefixes outside the grants are denied (and audited); a revoke applies at once', async (t) => {
  const { client, store, audit } = await startStorage(t, [{ prefix: 'photos/', ops: ['read', 'list'] }]);
  assert.equal(await refusal(client.put('photos/x', { content: Buffer.from('x') })), '403 STORAGE_DENIED');
  assert.equal(await refusal(client.delete('photos/x')), '403 STORAGE_DENIED');
  assert.equal(await refusal(client.read('docs/x', 10)), '403 STORAGE_DENIED');
  assert.equal(await refusal(client.read('photos2/x', 10)), '403 STORAGE_DENIED', 'a sibling folder');
  assert.equal(await refusal(client.list('', '')), '403 STORAGE_DENIED', 'a listing wider than the grant');
  assert.equal(await refusal(client.list('photos/', '')), 'allowed');
  await store.revokeStorageGrant('a', 'photos/');
  assert.equal(
    await refusal(client.list('photos/', '')),
    '403 STORAGE_DENIED',
    'revoked: denied on the next call',
  );
  const denied = (await audit()).filter((e) => e.kind === 'storage-denied');
  assert.equal(denied.length, 6);
  assert.match(
    String(denied[0]!.data.denied),
    /outside the prefixes granted for write|no grant allows write/,
  );
  assert.equal(denied[0]!.data.key, 'photos/x');
});

test("storage: another agent's objects are unreachable, even under a prefix of the same name", async (t) => {
  const { client, store, storageBlobs, otherFence } = await startStorage(t, [
    { prefix: 'photos/', ops: ['read', 'list', 'write', 'delete'] },
  ]);
  await store.grantStorage(
    { agent: 'b', prefix: 'photos/', ops: ['read', 'list', 'write', 'delete'] },
    Date.now(),
  );
  const written = await storageBlobs.write(Readable.from([Buffer.from('b secret')]), { maxBytes: 100 });
  const put = await store.putStorageObject({ ...otherFence, key: 'photos/secret', ...written }, Date.now());
  assert.equal(put.code, 'ok');

  assert.equal(await refusal(client.read('photos/secret', 100)), '404 STORAGE_OBJECT_NOT_FOUND');
  assert.deepEqual((await client.list('photos/', '')).objects, []);
  assert.equal(await refusal(client.delete('photos/secret')), '404 STORAGE_OBJECT_NOT_FOUND');
  await client.put('photos/secret', { content: Buffer.from('a own') });
  assert.equal((await client.read('photos/secret', 100)).content.toString(), 'a own');
  const theirs = (await store.getStorageObject('b', 'photos/secret'))!;
  assert.equal(theirs.sha256, written.sha256, "b's object is untouched by a's put of the same key");
});

test('storage: keys that try to leave the namespace are refused with the rule they break', async (t) => {
  const { raw, audit } = await startStorage(t, [{ prefix: '', ops: ['read', 'list', 'write', 'delete'] }]);
  const cases: [string, string][] = [
    ['GET', '/v1/storage/object/../../etc/passwd'],
    ['GET', '/v1/storage/object/photos/%2e%2e/%2e%2e/x'],
    ['PUT', '/v1/storage/object/%2e%2e%2fx'],
    ['GET', '/v1/storage/object//etc/passwd'],
    ['GET', '/v1/storage/object/a%00b'],
    ['DELETE', '/v1/storage/object/a%5C..%5Cb'],
    ['GET', '/v1/storage/object/a/./b'],
    ['GET', '/v1/storage/object/'],
    ['GET', `/v1/storage/object/${'x'.repeat(1100)}`],
    ['GET', '/v1/storage/object/%E0%A4%A'],
  ];
  for (const [method, path] of cases)
    assert.deepEqual(
      await raw(method, path),
      { status: 400, code: 'INVALID_INPUT' },
      `${method} ${path.slice(0, 60)}`,
    );
  const rows = await audit();
  assert.equal(rows.length, cases.length);
  assert.ok(rows.every((e) => e.kind === 'storage-denied' && e.data.error === 'INVALID_INPUT'));
  assert.deepEqual(
    [rows[0]!.data.key, rows[2]!.data.op, rows[5]!.data.op],
    ['../../etc/passwd', 'put', 'delete'],
    'the refused key is audited as sent',
  );
});

test('storage: a stale generation writes nothing, at the door or at the store', async (t) => {
  const { client, store, raw, tokenFor, fence } = await startStorage(t, [
    { prefix: '', ops: ['read', 'list', 'write', 'delete'] },
  ]);
  await client.put('k', { content: Buffer.from('kept') });
  // An older sandbox of the session: refused at the door.
  assert.deepEqual(await raw('DELETE', '/v1/storage/object/k', tokenFor(fence.generation - 1)), {
    status: 409,
    code: 'STALE_GENERATION',
  });
  // The session moved on (archived: generation bumped) while this sandbox still runs: refused by the store's fence.
  await store.archiveSession('s', Date.now());
  assert.equal(await refusal(client.put('k', { content: Buffer.from('late') })), '409 STALE_GENERATION');
  assert.equal(await refusal(client.put('new', { content: Buffer.from('late') })), '409 STALE_GENERATION');
  assert.equal(await refusal(client.delete('k')), '409 STALE_GENERATION');
  assert.equal(await store.getStorageObject('a', 'new'), null, 'a stale put is invisible');
  assert.equal((await store.getStorageObject('a', 'k'))?.size, 4, 'the object keeps its last fenced content');
  assert.equal((await client.read('k', 10)).content.toString(), 'kept');
});

test('storage: a 20 MiB object streams through both ways with its hash; unnamed blobs are collected', async (t) => {
  const { client, dir, store, storageBlobs, fence, socketPath } = await startStorage(t, [
    { prefix: 'big/', ops: ['read', 'write'] },
  ]);
  const size = 20 * MiB;
  const chunk = Buffer.alloc(MiB, 7);
  const expected = createHash('sha256');
  for (let i = 0; i < 20; i++) expected.update(chunk);
  const source = join(dir, 'source.bin');
  await writeFile(source, Buffer.alloc(0));
  for (let i = 0; i < 20; i++) await writeFile(source, chunk, { flag: 'a' });

  const put = await client.put('big/blob', { file: source });
  const target = join(dir, 'target.bin');
  const got = await client.download('big/blob', target);
  const sha256 = expected.digest('hex');
  assert.equal(put.size, size);
  assert.equal(put.sha256, sha256);
  assert.equal(got.sha256, sha256);
  assert.equal(
    createHash('sha256')
      .update(await readFile(target))
      .digest('hex'),
    sha256,
  );

  // Not buffered whole: with half the body sent and the request still open, the gateway
  // has already written it to its temp file.
  const half = 10 * MiB;
  const tmpBytes = async () => {
    const names = await readdir(join(dir, 'blobs', '.tmp'));
    const sizes = await Promise.all(
      names.map((n) => stat(join(dir, 'blobs', '.tmp', n)).then((s) => s.size)),
    );
    return Math.max(0, ...sizes);
  };
  const headers = { authorization: `Bearer ${token(fence)}`, 'content-length': String(2 * half) };
  let streamedBeforeEnd = 0;
  const answered = new Promise<number>((resolve, reject) => {
    const req = request(
      { socketPath, method: 'PUT', path: '/v1/storage/object/big/streamed', headers },
      (res) => {
        res.resume();
        resolve(res.statusCode!);
      },
    );
    req.on('error', reject);
    req.write(Buffer.alloc(half, 1));
    void (async () => {
      // Bounded wait for the condition (no timing is asserted): buffering would never meet it.
      for (let i = 0; i < 400 && (await tmpBytes()) < half; i++) await new Promise((r) => setTimeout(r, 25));
      streamedBeforeEnd = await tmpBytes();
      req.end(Buffer.alloc(half, 2));
    })();
  });
  assert.equal(await answered, 200);
  assert.equal(streamedBeforeEnd, half, 'the first half was on disk before the second was sent');
  assert.equal((await client.stat('big/streamed')).size, 2 * half);

  // Overwritten: the first blob is garbage once past the grace period; the named one stays.
  await client.put('big/blob', { content: Buffer.from('small now') });
  const files = () => readdir(join(dir, 'blobs', 'storage'));
  assert.equal((await files()).length, 3);
  const isNamed = (blob: string) => store.isStorageBlobNamed(blob);
  assert.equal(await storageBlobs.collectGarbage(isNamed, Date.now()), 0, 'young blobs are never collected');
  const old = new Date(Date.now() - 2 * BLOB_GRACE_MS);
  for (const f of await files()) await utimes(join(dir, 'blobs', 'storage', f), old, old);
  assert.equal(await storageBlobs.collectGarbage(isNamed, Date.now()), 1);
  assert.equal((await client.read('big/blob', 100)).content.toString(), 'small now');
});

test('storage tools: the model gets results, and refusals as tool errors', async (t) => {
  const { gatewayClient, dir } = await startStorage(t, [
    { prefix: 'notes/', ops: ['read', 'list', 'write'] },
  ]);
  const ctx: ToolContext = {
    workspace: dir,
    maxOutputBytes: 40,
    bashTimeoutMs: 1000,
    attempt: 1,
    getState: async () => undefined,
    putState: async () => {},
    gateway: gatewayClient,
    resident: false,
  };
  const tool = (name: string, input: unknown) => runTool(name, input, ctx);
  assert.match(
    (await tool('storage_put', { key: 'notes/a', content: 'x'.repeat(50) })).output,
    /^stored notes\/a \(50 bytes/,
  );
  const cut = await tool('storage_get', { key: 'notes/a' });
  assert.equal(cut.isError, false);
  assert.match(cut.output, /^x{20}\n\[cut at 20 of 50/);
  assert.match((await tool('storage_list', { prefix: 'notes/' })).output, /^notes\/a\t50 bytes/);
  assert.match((await tool('storage_stat', { key: 'notes/a' })).output, /^notes\/a\t50 bytes/);
  const denied = await tool('storage_delete', { key: 'notes/a' });
  assert.equal(denied.isError, true);
  assert.match(denied.output, /403/);
  assert.equal((await tool('storage_get', { key: 'notes/none' })).isError, true);
  assert.equal((await tool('storage_put', { key: 'notes/b' })).isError, true, 'neither content nor path');
});
