/**
 * The history routes through the HTTP layer (app.inject, real SQLite, a file blob store):
 * a turn by id and by version, its diff, files at a version, and the refusals — a turn or
 * path that is not there, another tenant's session, a turn that did not commit, a version
 * a snapshot dropped, a path that climbs out.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { FileBlobStore } from '../blobs/index.js';
import { agentSpecSchema, loadConfig, systemClock, toolProgressText } from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { packTree, WorkspaceHistory } from '../workspace/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';

async function setup(t: { after(fn: () => Promise<void>): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'berth-history-routes-'));
  const config = loadConfig({});
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const blobs = new FileBlobStore(join(dir, 'blobs'));
  const app = await buildApp({
    config,
    store,
    clock: systemClock,
    log: pino({ level: 'silent' }),
    history: new WorkspaceHistory(blobs),
  });
  t.after(async () => {
    await app.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const now = Date.now();
  const acme = (await issueToken(store, 'acme', 'a', now)).token;
  const globex = (await issueToken(store, 'globex', 'g', now)).token;
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), now, 'acme');
  await store.registerWorker({ id: 'w1', host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
  /** An object holding `files` (a tree packed whole: additions only), under `key`. */
  const pack = async (key: string, files: Record<string, string>) => {
    const tree = await mkdtemp(join(dir, 'tree-'));
    for (const [name, content] of Object.entries(files)) await writeFile(join(tree, name), content);
    const chunks: Buffer[] = [];
    for await (const c of packTree(tree)) chunks.push(c as Buffer);
    const bytes = Buffer.concat(chunks);
    await blobs.put(key, [bytes], { maxBytes: 1 << 30 });
    return { key, size: bytes.length };
  };
  /** One message through one committed turn whose layer writes `files`; returns the turn's id. */
  const commit = async (text: string, files: Record<string, string>, abortFirst = false) => {
    await store.enqueueMessage({ sessionId: 's1', agent: 'sh', text, now, tenant: 'acme' });
    const claimed = await store.claimRunnableSession('w1', Date.now());
    const fence = { sessionId: 's1', generation: claimed!.session.generation, workerId: 'w1' };
    // One clock for the turn's records, a retry well past its backoff: the timeline orders by it.
    let at = Date.now();
    const start = async () => {
      at += 60_000;
      const started = await store.startTurn(fence, at);
      return started.code === 'ok' && started.value ? started.value.turn : assert.fail('no turn');
    };
    let turn = await start();
    if (abortFirst) {
      // The killed try got as far as a tool call, a checkpoint and a model call.
      const fenced = { ...fence, turnId: turn.id };
      await store.recordProgress({ ...fenced, text: toolProgressText('bash', 'started') }, ++at);
      await store.recordProgress({ ...fenced, text: toolProgressText('bash', 'finished') }, ++at);
      const cp = await store.recordCheckpoint(
        {
          ...fenced,
          messageId: turn.messageIds[0]!,
          baseSeq: 0,
          count: 1,
          label: 'model-call',
          key: '',
          size: 0,
        },
        ++at,
      );
      assert.equal(cp.code, 'ok');
      await store.recordModelUsage(
        {
          agent: 'sh',
          sessionId: 's1',
          turnId: turn.id,
          generation: fence.generation,
          provider: 'anthropic',
          model: 'm',
          inputTokens: 7,
          outputTokens: 3,
        },
        ++at,
      );
      await store.abortTurn({ ...fence, turnId: turn.id, code: 'SANDBOX_EXITED', error: 'killed' }, ++at);
      turn = await start();
    }
    const baseVersion = (await store.getWorkspaceChain('s1')).version;
    const layer = await pack(`layers/${turn.id}`, files);
    const outputs = [{ text: `did ${text}` }];
    const state = { last: text };
    assert.equal(
      await store.commitTurn(
        { ...fence, turnId: turn.id, outputs, state, workspace: { baseVersion, layer } },
        ++at,
      ),
      'ok',
    );
    await store.releaseSession(fence, Date.now());
    return turn.id;
  };
  const call = async (url: string, token = acme) => {
    const res = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
    const json = res.headers['content-type']?.toString().startsWith('application/json');
    return { status: res.statusCode, body: json ? res.json() : res.body, headers: res.headers };
  };
  const post = async (url: string, body: unknown, token = acme) => {
    const res = await app.inject({
      method: 'POST',
      url,
      payload: body as object,
      headers: { authorization: `Bearer ${token}` },
    });
    return { status: res.statusCode, body: res.json() };
  };
  return { store, pack, commit, call, post, globex };
}

test('a turn by id or version: attempts, messages, replies, state, faults; its diff; files at each version', async (t) => {
  const { commit, call } = await setup(t);
  const first = await commit('one', { 'a.txt': 'v1\n' }, true);
  const second = await commit('two', { 'a.txt': 'v2\n', 'b.txt': 'new\n' });

  const byId = await call(`/v1/sessions/s1/turns/${first}`);
  assert.equal(byId.status, 200);
  assert.equal(byId.body.version, 1);
  assert.deepEqual(
    byId.body.attempts.map((a: { status: string }) => a.status),
    ['aborted', 'committed'],
  );
  assert.deepEqual(
    byId.body.faults.map((f: { code: string; retryable: boolean }) => [f.code, f.retryable]),
    [['SANDBOX_EXITED', true]],
  );
  assert.deepEqual(
    byId.body.messages.map((m: { text: string }) => m.text),
    ['one'],
  );
  assert.deepEqual(
    byId.body.replies.map((m: { text: string }) => m.text),
    ['did one'],
  );
  assert.deepEqual(byId.body.state, {}, 'the next turn put "last" again');
  assert.ok(byId.body.timing.totalMs >= 0);
  const byVersion = await call('/v1/sessions/s1/turns/2');
  assert.deepEqual([byVersion.body.turn.id, byVersion.body.state], [second, { last: 'two' }]);

  const timeline = await call(`/v1/sessions/s1/turns/${first}/timeline`);
  assert.equal(timeline.status, 200);
  assert.deepEqual(
    timeline.body.tries.map((x: { status: string; code: string | null; resumedFrom: number | null }) => [
      x.status,
      x.code,
      x.resumedFrom,
    ]),
    [
      ['aborted', 'SANDBOX_EXITED', null],
      ['committed', null, 1],
    ],
  );
  assert.deepEqual(
    timeline.body.entries.map((e: { attempt: number; kind: string }) => `${e.attempt} ${e.kind}`),
    [
      '1 try-started',
      '1 tool-call',
      '1 checkpoint',
      '1 model-call',
      '1 try-ended',
      '2 try-started',
      '2 resumed',
      '2 reply',
      '2 try-ended',
    ],
  );
  assert.equal(timeline.body.running, false);
  assert.equal(
    (await call(`/v1/sessions/s1/turns/${second}/timeline`)).body.entries.filter(
      (e: { kind: string }) => e.kind === 'checkpoint',
    ).length,
    0,
    "another turn's checkpoints are not this one's",
  );

  const diff = await call('/v1/sessions/s1/turns/2/diff');
  assert.equal(diff.status, 200);
  assert.equal(diff.body.turnId, second);
  assert.deepEqual(
    diff.body.files.map((f: { path: string; change: string; diff: string }) => [f.path, f.change, f.diff]),
    [
      ['a.txt', 'modified', '@@ -1 +1 @@\n-v1\n+v2\n'],
      ['b.txt', 'added', '@@ -0,0 +1 @@\n+new\n'],
    ],
  );

  const root1 = await call('/v1/sessions/s1/files?version=1');
  assert.deepEqual(
    root1.body.entries.map((e: { name: string }) => e.name),
    ['a.txt'],
  );
  const current = await call('/v1/sessions/s1/files?path=/a.txt');
  assert.equal(current.status, 200);
  assert.equal(current.headers['content-type'], 'application/octet-stream');
  assert.equal(current.headers['x-berth-version'], '2');
  assert.equal(current.body, 'v2\n');
  assert.equal((await call('/v1/sessions/s1/files?version=1&path=a.txt')).body, 'v1\n');

  const paths = Object.keys((await call('/v1/openapi.json')).body.paths);
  for (const path of [
    '/v1/sessions/{id}/turns/{turn}',
    '/v1/sessions/{id}/turns/{turn}/diff',
    '/v1/sessions/{id}/turns/{turn}/timeline',
    '/v1/sessions/{id}/files',
  ])
    assert.ok(paths.includes(path), `${path} in the OpenAPI document`);
});

test('refusals: unknown turn, path or version, another tenant, an uncommitted turn, a version compacted away, ..', async (t) => {
  const { store, pack, commit, call, globex } = await setup(t);
  await commit('one', { 'a.txt': 'v1\n' });
  await commit('two', { 'a.txt': 'v2\n' });
  const code = async (url: string, token?: string) => {
    const res = await call(url, token);
    return [res.status, res.body.error?.code];
  };
  assert.deepEqual(await code('/v1/sessions/s1/turns/turn_none'), [404, 'SESSION_TURN_NOT_FOUND']);
  assert.deepEqual(await code('/v1/sessions/s1/turns/9/diff'), [404, 'SESSION_TURN_NOT_FOUND']);
  assert.deepEqual(await code('/v1/sessions/s1/files?path=nope'), [404, 'WORKSPACE_PATH_NOT_FOUND']);
  assert.deepEqual(await code('/v1/sessions/s1/files?version=7'), [400, 'INVALID_INPUT']);
  assert.deepEqual(await code('/v1/sessions/s1/files?path=../x'), [400, 'INVALID_INPUT']);
  for (const url of [
    '/v1/sessions/s1/turns/1',
    '/v1/sessions/s1/turns/1/diff',
    '/v1/sessions/s1/turns/1/timeline',
    '/v1/sessions/s1/files',
  ])
    assert.deepEqual(await code(url, globex), [404, 'SESSION_NOT_FOUND'], url);
  assert.deepEqual(await code('/v1/sessions/nobody/files'), [404, 'SESSION_NOT_FOUND']);

  await store.enqueueMessage({ sessionId: 's1', text: 'three', now: Date.now() });
  const claimed = await store.claimRunnableSession('w1', Date.now());
  const fence = { sessionId: 's1', generation: claimed!.session.generation, workerId: 'w1' };
  const started = await store.startTurn(fence, Date.now());
  const running = started.code === 'ok' && started.value ? started.value.turn.id : assert.fail('no turn');
  assert.deepEqual(await code(`/v1/sessions/s1/turns/${running}/diff`), [409, 'TURN_NOT_COMMITTED']);

  const snapshot = await pack('snapshots/s1-2', { 'a.txt': 'v2\n' });
  assert.equal(
    await store.recordWorkspaceSnapshot({ sessionId: 's1', version: 2, ...snapshot }, Date.now()),
    true,
  );
  const gone = await call('/v1/sessions/s1/files?version=1');
  assert.deepEqual([gone.status, gone.body.error.code], [410, 'VERSION_NOT_RETAINED']);
  assert.match(gone.body.error.message, /only version 2 is available/);
  assert.deepEqual(await code('/v1/sessions/s1/turns/2/diff'), [410, 'VERSION_NOT_RETAINED']);
  assert.equal((await call('/v1/sessions/s1/files?version=2&path=a.txt')).body, 'v2\n');
});

test('rewind and fork from a version: the old tree as a new version, history kept, the refusals', async (t) => {
  const { store, pack, commit, call, post, globex } = await setup(t);
  await commit('one', { 'a.txt': 'v1\n' });
  await commit('two', { 'a.txt': 'v2\n', 'b.txt': 'new\n' });
  const rewound = await post('/v1/sessions/s1/rewind', { toVersion: 1 });
  assert.equal(rewound.status, 200);
  assert.deepEqual([rewound.body.version, rewound.body.toVersion, rewound.body.objects], [3, 1, 1]);
  const root = await call('/v1/sessions/s1/files');
  assert.deepEqual(
    root.body.entries.map((e: { name: string }) => e.name),
    ['a.txt'],
    'b.txt is gone with the rewind',
  );
  assert.equal((await call('/v1/sessions/s1/files?path=a.txt')).body, 'v1\n');
  assert.equal((await call('/v1/sessions/s1/files?version=2&path=b.txt')).body, 'new\n', 'v2 still readable');
  const undone = await call('/v1/sessions/s1/turns/3/diff');
  assert.deepEqual(
    [undone.status, undone.body.turnId, undone.body.rewoundTo, undone.body.counts],
    [200, null, 1, { added: 0, modified: 1, deleted: 1, renamed: 0 }],
    "a rewind's diff: version 2's tree against version 1's",
  );
  assert.deepEqual(
    undone.body.files.map((f: { path: string; change: string; diff: string }) => [f.path, f.change, f.diff]),
    [
      ['a.txt', 'modified', '@@ -1 +1 @@\n-v2\n+v1\n'],
      ['b.txt', 'deleted', '@@ -1 +0,0 @@\n-new\n'],
    ],
  );
  // Back to before the first turn: an empty tree, named by a small object of its own.
  const empty = await post('/v1/sessions/s1/rewind', { toVersion: 0 });
  assert.deepEqual([empty.status, empty.body.version, empty.body.objects], [200, 4, 0]);
  assert.deepEqual((await call('/v1/sessions/s1/files')).body.entries, []);
  assert.deepEqual((await call('/v1/sessions/s1/workspace')).body.rewinds, [
    { version: 3, toVersion: 1 },
    { version: 4, toVersion: 0 },
  ]);
  // A fork from version 2, while the source is at 4.
  const fork = await post('/v1/sessions/s1/fork', { id: 'f1', fromVersion: 2 });
  assert.deepEqual([fork.status, fork.body.workspaceVersion], [201, 2]);
  assert.equal((await call('/v1/sessions/f1/files?path=b.txt')).body, 'new\n');

  const code = async (url: string, body: unknown, token?: string) => {
    const res = await post(url, body, token);
    return [res.status, res.body.error?.code];
  };
  assert.deepEqual(await code('/v1/sessions/s1/rewind', { toVersion: 1 }, globex), [
    404,
    'SESSION_NOT_FOUND',
  ]);
  assert.deepEqual(await code('/v1/sessions/s1/rewind', { toVersion: 9 }), [400, 'INVALID_INPUT']);
  assert.deepEqual(await code('/v1/sessions/s1/rewind', { toVersion: -1 }), [400, 'INVALID_INPUT']);
  assert.deepEqual(await code('/v1/sessions/s1/fork', { fromVersion: 9 }), [400, 'INVALID_INPUT']);
  await store.enqueueMessage({ sessionId: 's1', text: 'three', now: Date.now() });
  assert.deepEqual(await code('/v1/sessions/s1/rewind', { toVersion: 1 }), [409, 'SESSION_BUSY']);
  await commit('four', { 'c.txt': 'c\n' });
  const snapshot = await pack('snapshots/s1-5', { 'c.txt': 'c\n' });
  assert.equal(
    await store.recordWorkspaceSnapshot({ sessionId: 's1', version: 5, ...snapshot }, Date.now()),
    true,
  );
  const gone = await post('/v1/sessions/s1/fork', { fromVersion: 2 });
  assert.deepEqual([gone.status, gone.body.error.code], [410, 'VERSION_NOT_RETAINED']);
  assert.match(gone.body.error.message, /only version 5 is available/);
  // A resident agent writes its workspace in place: no version to go back or fork from.
  await store.createAgent(
    agentSpecSchema.parse({ name: 'res', provider: 'command', mode: 'resident' }),
    Date.now(),
    'acme',
  );
  await store.enqueueMessage({ sessionId: 'r1', agent: 'res', text: 'x', now: Date.now(), tenant: 'acme' });
  assert.deepEqual(await code('/v1/sessions/r1/fork', { fromVersion: 0 }), [410, 'VERSION_NOT_RETAINED']);
  const summary = (await call('/v1/sessions/s1/workspace')).body;
  const chain = await store.getWorkspaceChain('s1');
  const sizes = new Map((chain.history ?? []).map((e) => [e.key, e.size]));
  assert.deepEqual(
    [summary.version, summary.retained, summary.retention, summary.objects, summary.bytes, summary.rewinds],
    [5, { oldest: 5, newest: 5 }, null, sizes.size, [...sizes.values()].reduce((a, b) => a + b, 0), []],
  );
  assert.ok(summary.bytes > 0);
  assert.deepEqual((await call('/v1/sessions/s1/workspace', globex)).status, 404);
  const paths = Object.keys((await call('/v1/openapi.json')).body.paths);
  assert.ok(paths.includes('/v1/sessions/{id}/rewind'), 'rewind in the OpenAPI document');
  assert.ok(paths.includes('/v1/sessions/{id}/workspace'), 'the workspace summary in the OpenAPI document');
});
