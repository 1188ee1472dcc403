/** The worker's control endpoint over real HTTP, against a real SQLite store: the key and the fence hold at the door. */
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { pino } from 'pino';
import { type ExecLine, sleep, systemClock } from '../core/index.js';
import type { ExecSink, ExecStart } from '../gateway/index.js';
import { openSqliteStore } from '../store/index.js';
import { ControlServer, type HeldSandbox } from './control-server.js';
import { SandboxFiles } from './sandbox-files.js';

const KEY = 'a'.repeat(64);

/** A control server holding session s at generation 3, whose "runner" prints hi and exits 0, or runs until cancelled. */
async function setUp(t: TestContext, o: { runsUntilCancelled?: boolean; filesRoot?: string } = {}) {
  const store = openSqliteStore({
    path: ':memory:',
    leaseMs: 10_000,
    retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 },
  });
  const started: ExecStart[] = [];
  let cancelled!: () => void;
  const cancel = new Promise<void>((resolve) => {
    cancelled = resolve;
  });
  const held: HeldSandbox = {
    generation: 3,
    exec: {
      start(request: ExecStart, sink: ExecSink) {
        started.push(request);
        if (!o.runsUntilCancelled)
          setImmediate(() => {
            sink({ type: 'stdout', data: 'hi\n' });
            sink({ type: 'exit', exitCode: 0 });
          });
        else setImmediate(() => sink({ type: 'stdout', data: 'working\n' }));
        return cancelled;
      },
    },
    files: new SandboxFiles({
      sessionId: 's',
      root: async () => o.filesRoot ?? '/nonexistent',
      uid: 1000,
      limitBytes: 2 ** 20,
      usedBytes: async () => 0,
    }),
  };
  const server = new ControlServer({
    listen: '127.0.0.1:0',
    key: KEY,
    workerId: 'w1',
    store,
    clock: systemClock,
    log: pino({ level: 'silent' }),
    maxOutputBytes: 1024,
    held: (sessionId) => (sessionId === 's' ? held : null),
  });
  const url = await server.listen();
  t.after(async () => {
    await server.close();
    await store.close();
  });
  const exec = (fence: string, key = KEY, body: object = { command: 'echo hi' }, signal?: AbortSignal) =>
    fetch(`${url}/v1/sessions/s/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'x-berth-fence': fence, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  return { store, started, cancel, exec, url };
}

test('the holder of the binding streams the command’s lines and its exit', async (t) => {
  const { exec, started } = await setUp(t);
  const res = await exec('s.3');
  assert.equal(res.status, 200);
  const lines = (await res.text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as ExecLine);
  assert.deepEqual(lines, [
    { type: 'stdout', data: 'hi\n' },
    { type: 'exit', exitCode: 0 },
  ]);
  assert.deepEqual(started, [{ command: 'echo hi', timeoutMs: 600_000, maxOutputBytes: 1024 }]);
});

test('a wrong key is 401; a stale generation or a session not held here is 409, audited, and nothing runs', async (t) => {
  const { exec, started, store } = await setUp(t);
  const wrongKey = await exec('s.3', 'b'.repeat(64));
  assert.equal(wrongKey.status, 401);
  assert.equal(((await wrongKey.json()) as { error: { code: string } }).error.code, 'UNAUTHORIZED');
  const stale = await exec('s.2');
  assert.equal(stale.status, 409);
  assert.equal(((await stale.json()) as { error: { code: string } }).error.code, 'STALE_GENERATION');
  const other = await fetch(stale.url.replace('/s/', '/x/'), {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'x-berth-fence': 'x.3' },
    body: '{"command":"true"}',
  });
  assert.equal(other.status, 409);
  const audits = await store.listAudit(0, 10);
  assert.deepEqual(
    audits.map((a) => [a.kind, a.sessionId, a.generation]),
    [
      ['stale-generation', 's', 2],
      ['stale-generation', 'x', 3],
    ],
  );
  const invalid = await exec('s.3', KEY, { command: '' });
  assert.equal(invalid.status, 400);
  assert.deepEqual(started, [], 'nothing was offered to the runner');
});

test('a request closed early cancels the command', async (t) => {
  const { exec, cancel } = await setUp(t, { runsUntilCancelled: true });
  const gone = new AbortController();
  const res = await exec('s.3', KEY, undefined, gone.signal);
  const reader = res.body!.getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  assert.match(first, /working/);
  gone.abort();
  await cancel;
});

test('files: the holder of the binding writes and reads them; a stale fence writes nothing; codes pass through', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'berth-control-files-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const { url } = await setUp(t, { filesRoot: root });
  const call = (method: string, route: string, fence: string, body?: string) =>
    fetch(`${url}/v1/sessions/s/sandbox/files${route}`, {
      method,
      headers: { authorization: `Bearer ${KEY}`, 'x-berth-fence': fence },
      ...(body === undefined ? {} : { body }),
    });
  const stale = await call('PUT', '/content?path=a.txt', 's.2', 'stale');
  assert.equal(stale.status, 409);
  assert.deepEqual(await readdir(root), [], 'a stale fence wrote nothing');
  const put = await call('PUT', '/content?path=a.txt', 's.3', 'fresh');
  assert.equal(put.status, 200);
  assert.equal(((await put.json()) as { size: number }).size, 5);
  const got = await call('GET', '/content?path=%2Fworkspace%2Fa.txt', 's.3');
  assert.deepEqual([got.status, got.headers.get('content-length'), await got.text()], [200, '5', 'fresh']);
  const codeOf = async (res: Response) => [
    res.status,
    ((await res.json()) as { error: { code: string } }).error.code,
  ];
  assert.deepEqual(await codeOf(await call('GET', '/stat?path=nope', 's.3')), [404, 'FILE_NOT_FOUND']);
  assert.deepEqual(await codeOf(await call('GET', '/content?path=..%2Fx', 's.3')), [
    400,
    'PATH_OUTSIDE_WORKSPACE',
  ]);
  assert.deepEqual(await codeOf(await call('GET', '/chmod?path=a.txt', 's.3')), [404, 'NOT_FOUND']);
});

test('files: a write whose request breaks off mid-body leaves nothing behind', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'berth-control-files-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const { url } = await setUp(t, { filesRoot: root });
  const req = request(`${url}/v1/sessions/s/sandbox/files/content?path=half.bin`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${KEY}`, 'x-berth-fence': 's.3', 'content-length': String(2 ** 20) },
  });
  req.on('error', () => undefined);
  req.write(Buffer.alloc(64 * 1024));
  // The worker made its temp file: the write is under way.
  while ((await readdir(root)).length === 0) await sleep(10);
  req.destroy();
  while ((await readdir(root)).length > 0) await sleep(10);
  assert.deepEqual(await readdir(root), []);
});
