/**
 * Session workspaces that survive the loss of a machine: workers on separate data dirs
 * ("machines") share a PostgreSQL store and a bucket of a real radosgw. A machine that ran
 * a session's turns is destroyed (worker SIGKILLed, sandboxes killed, disk wiped) and the
 * session goes on elsewhere with every committed file; a machine whose copy is behind the
 * store brings it level before the turn (never runs on it); a crash between a layer's
 * upload and its commit leaves only an object nobody names, which the collector removes;
 * a fork starts from the source's files and state and the two diverge; an S3 daemon killed
 * while a turn runs, for longer than the blob store's own retries, costs the turn latency,
 * not a try.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { collectGarbage } from '../src/blobs/index.js';
import { Berth } from '../src/client/index.js';
import type { ScriptPlan } from '../src/core/index.js';
import { failpointEnv } from './helpers/failpoint-preload.js';
import { type Machine, startMachines } from './helpers/machines.js';
import { eventually, exited } from './helpers/processes.js';
import { testS3 } from './helpers/s3.js';

const plan = (p: ScriptPlan) => JSON.stringify(p);
const run = promisify(execFile);
type Client = Awaited<ReturnType<typeof startMachines>>['client'];

/** Posts a message and follows the session's events to its reply (or failure). */
async function send(client: Client, session: string, p: ScriptPlan, agent = 'scr') {
  const posted = await client.request<{ eventId: number }>('POST', `/v1/sessions/${session}/messages`, {
    agent,
    text: plan(p),
  });
  for await (const e of client.events(session, posted.eventId, AbortSignal.timeout(90_000))) {
    if (e.type === 'reply' || e.type === 'failed') return e;
  }
  throw new Error('event stream ended');
}

const logOf = (m: Machine) => readFile(join(m.dataDir, 'worker.log'), 'utf8');
/** A file a turn makes of 1.3 MB (`seq 1 200000`), and its hash as the next machine must find it. */
const BIG = 'seq 1 200000 > deep/dir/big.txt';
const BIG_SHA256 = createHash('sha256')
  .update(`${Array.from({ length: 200_000 }, (_, i) => i + 1).join('\n')}\n`)
  .digest('hex');

test('a machine destroyed after its commits: the session continues on another with every committed file', async (t) => {
  const { client, store, addMachine, destroy } = await startMachines(t);
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  const a = await addMachine('a');
  const first = await send(client, 'w1', {
    steps: [
      { write: { path: 'f.txt', content: 'one\n' } },
      { run: `mkdir -p deep/dir && ${BIG}` },
      { run: 'ln -s deep/dir/big.txt link && chmod 750 deep && rm -f nothing' },
      { putState: { key: 'n', value: 1 } },
    ],
    reply: 'written',
  });
  assert.equal(first.type, 'reply', JSON.stringify(first.data));
  const second = await send(client, 'w1', {
    steps: [{ run: 'rm f.txt && echo two > g.txt' }],
    reply: 'changed',
  });
  assert.equal(second.type, 'reply', JSON.stringify(second.data));
  assert.equal(
    (await store.getWorkspaceChain('w1')).entries.length,
    2,
    'one layer per commit that changed files',
  );

  await destroy(a);
  const b = await addMachine('b');
  const third = await send(client, 'w1', {
    steps: [
      { assertFile: { path: 'f.txt', equals: null } },
      { assertFile: { path: 'g.txt', equals: 'two\n' } },
      { run: `test "$(sha256sum < deep/dir/big.txt | cut -d' ' -f1)" = ${BIG_SHA256}` },
      { run: 'test "$(readlink link)" = deep/dir/big.txt && test "$(stat -c %a deep)" = 750' },
      { assertState: { key: 'n', equals: 1 } },
    ],
    reply: 'all there',
  });
  assert.equal(third.type, 'reply', JSON.stringify(third.data));
  assert.match(await logOf(b), /"how":"materialised"[^\n]*Workspace brought level with the store/);
  const turns = (await store.listTurns('w1')).filter((x) => x.status === 'committed');
  assert.deepEqual(
    turns.map((x) => x.baseVersion),
    [0, 1, 2],
    'each committed turn ran on the version before it',
  );
});

test('a copy behind the store is brought level before the turn, never used as it was', async (t) => {
  const { client, addMachine, destroy } = await startMachines(t);
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  const a = await addMachine('a');
  assert.equal(
    (await send(client, 'b1', { steps: [{ write: { path: 'v1', content: '1' } }], reply: 'ok' })).type,
    'reply',
  );
  // A leaves (gracefully: its disk stays, holding version 1); C commits version 2 meanwhile.
  a.child.kill('SIGTERM');
  await exited(a.child);
  const c = await addMachine('c');
  assert.equal(
    (await send(client, 'b1', { steps: [{ write: { path: 'v2', content: '2' } }], reply: 'ok' })).type,
    'reply',
  );
  await destroy(c);
  // A comes back with its copy at version 1.
  const back = await addMachine('a-again', { BERTH_DATA: a.dataDir });
  const seen = await send(client, 'b1', {
    steps: [{ assertFile: { path: 'v1', equals: '1' } }, { assertFile: { path: 'v2', equals: '2' } }],
    reply: 'level',
  });
  assert.equal(seen.type, 'reply', JSON.stringify(seen.data));
  assert.match(await logOf(back), /"how":"layers"[^\n]*Workspace brought level with the store/);
});

test('a worker killed between a layer’s upload and its commit: nothing of it is visible, its object is collected', async (t) => {
  const { client, store, openBlobs, addMachine } = await startMachines(t);
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  const doomed = await addMachine('doomed', failpointEnv('after-upload'));
  const blobs = await openBlobs();
  await client.request('POST', '/v1/sessions/u1/messages', {
    agent: 'scr',
    text: plan({ steps: [{ write: { path: 'out.txt', content: 'once\n' } }], reply: 'done' }),
  });
  await exited(doomed.child);
  const orphans = (await blobs.list('layers/')).objects;
  assert.equal(orphans.length, 1, 'the layer was uploaded before the crash');
  assert.equal((await store.getWorkspaceChain('u1')).version, 0, 'and never committed');
  assert.equal(await store.isWorkspaceObjectNamed(orphans[0]!.key), false);

  await addMachine('survivor');
  const reply = await eventually('the retry commits', async () => {
    const out = (await store.listMessages('u1', 0, 10)).filter((m) => m.direction === 'out');
    return out.length > 0 ? out : undefined;
  });
  assert.equal(reply.length, 1, 'one reply');
  const chain = await store.getWorkspaceChain('u1');
  assert.equal(chain.version, 1);
  assert.notEqual(chain.entries[0]?.key, orphans[0]!.key, 'the retry uploaded its own layer');
  // Past its grace period, the orphan (and only it) is collected.
  const removed = await collectGarbage(blobs, {
    prefix: 'layers/',
    isNamed: (key) => store.isWorkspaceObjectNamed(key),
    now: Date.now(),
    graceMs: 0,
  });
  assert.equal(removed, 1);
  assert.deepEqual(
    (await blobs.list('layers/')).objects.map((o) => o.key),
    [chain.entries[0]!.key],
  );
});

test('a machine lost between a commit and its promotion, with no next message: a live process settles the owed layer from the chain', async (t) => {
  const { client, store, addMachine, destroy } = await startMachines(t);
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  const doomed = await addMachine('doomed', failpointEnv('before-mark-promoted'));
  await client.request('POST', '/v1/sessions/p1/messages', {
    agent: 'scr',
    text: plan({ steps: [{ write: { path: 'kept.txt', content: 'committed\n' } }], reply: 'done' }),
  });
  await exited(doomed.child);
  const owed = (await store.getSessionView('p1', Date.now()))?.pendingLayer;
  assert.ok(owed, 'the turn committed and its layer awaits promotion');
  await destroy(doomed);

  // Any live process that sweeps may settle it (the API's host among them); none holds the layer.
  await eventually('the owed layer is settled without a next message', async () =>
    (await store.getSessionView('p1', Date.now()))?.pendingLayer === null ? true : undefined,
  );
  await addMachine('survivor');
  const seen = await send(client, 'p1', {
    steps: [{ assertFile: { path: 'kept.txt', equals: 'committed\n' } }],
    reply: 'there',
  });
  assert.equal(seen.type, 'reply', JSON.stringify(seen.data));
});

test('fork: a new session from the source’s last committed turn, sharing its objects; the two diverge', async (t) => {
  const { url, token, client, store, addMachine } = await startMachines(t);
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  await addMachine('a');
  const made = await send(client, 'src', {
    steps: [
      { write: { path: 'shared.txt', content: 'from src\n' } },
      { putState: { key: 'k', value: 'src' } },
    ],
    reply: 'ok',
  });
  assert.equal(made.type, 'reply');
  // Through the SDK, then through the CLI.
  const fork = await new Berth({ url, token }).sessions.fork('src', 'fork');
  assert.deepEqual([fork.id, fork.workspaceVersion], ['fork', 1]);
  const { stdout } = await run(
    process.execPath,
    ['bin/berth.js', 'session', 'fork', 'src', 'fork2', '--json'],
    {
      env: { ...process.env, BERTH_URL: url, BERTH_TOKEN: token },
    },
  );
  assert.equal((JSON.parse(stdout) as { id: string }).id, 'fork2');
  const inFork2 = await send(client, 'fork2', {
    steps: [{ assertFile: { path: 'shared.txt', equals: 'from src\n' } }],
    reply: 'forked by the CLI',
  });
  assert.equal(inFork2.type, 'reply', JSON.stringify(inFork2.data));
  assert.deepEqual(
    (await store.getWorkspaceChain('fork')).entries.map((e) => e.key),
    (await store.getWorkspaceChain('src')).entries.map((e) => e.key),
    'the same objects, not copies',
  );
  const inFork = await send(client, 'fork', {
    steps: [
      { assertFile: { path: 'shared.txt', equals: 'from src\n' } },
      { assertState: { key: 'k', equals: 'src' } },
      { write: { path: 'shared.txt', content: 'changed in the fork\n' } },
    ],
    reply: 'forked',
  });
  assert.equal(inFork.type, 'reply', JSON.stringify(inFork.data));
  const inSource = await send(client, 'src', {
    steps: [{ assertFile: { path: 'shared.txt', equals: 'from src\n' } }],
    reply: 'unchanged',
  });
  assert.equal(inSource.type, 'reply', JSON.stringify(inSource.data));
});

test('a chain compacted into a snapshot: the superseded layers are dropped from it and collected, and a new machine materialises from the snapshot', async (t) => {
  const { client, store, openBlobs, addMachine, destroy } = await startMachines(t, {
    env: { BERTH_SNAPSHOT_LAYERS: '2' },
  });
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  const blobs = await openBlobs();
  const a = await addMachine('a');
  for (const name of ['one', 'two', 'three']) {
    const sent = await send(client, 'c1', {
      steps: [{ write: { path: `${name}.txt`, content: name } }],
      reply: 'ok',
    });
    assert.equal(sent.type, 'reply', JSON.stringify(sent.data));
  }
  const chain = await eventually('the chain compacted after the second commit', async () => {
    const c = await store.getWorkspaceChain('c1');
    return c.entries[0]?.kind === 'snapshot' ? c : undefined;
  });
  assert.deepEqual(
    chain.entries.map((e) => [e.kind, e.version]),
    [
      ['snapshot', 2],
      ['layer', 3],
    ],
  );
  assert.match(await logOf(a), /Workspace chain compacted into a snapshot/);
  const layersBefore = (await blobs.list('layers/')).objects.map((o) => o.key);
  assert.equal(layersBefore.length, 3, 'three layers uploaded');
  const removed = await collectGarbage(blobs, {
    prefix: 'layers/',
    isNamed: (key) => store.isWorkspaceObjectNamed(key),
    now: Date.now(),
    graceMs: 0,
  });
  assert.equal(removed, 2, 'the two layers the snapshot superseded');
  assert.deepEqual(
    (await blobs.list('layers/')).objects.map((o) => o.key),
    [chain.entries[1]!.key],
  );

  await destroy(a);
  const b = await addMachine('b');
  const seen = await send(client, 'c1', {
    steps: ['one', 'two', 'three'].map((name) => ({ assertFile: { path: `${name}.txt`, equals: name } })),
    reply: 'all there',
  });
  assert.equal(seen.type, 'reply', JSON.stringify(seen.data));
  assert.match(
    await logOf(b),
    /"how":"materialised","objects":2[^\n]*Workspace brought level with the store/,
  );
});

test('an S3 daemon killed for longer than the blob store retries, while a turn runs: the turn commits late, on its first try', async (t) => {
  const { client, store, addMachine } = await startMachines(t);
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  const a = await addMachine('a');
  const s3 = await testS3();
  const posted = await client.request<{ eventId: number }>('POST', '/v1/sessions/o1/messages', {
    agent: 'scr',
    text: plan({
      steps: [{ progress: 'working' }, { sleep: 3000 }, { write: { path: 'out.txt', content: 'kept\n' } }],
      reply: 'done',
    }),
  });
  let outcome: string | undefined;
  let killed = false;
  for await (const e of client.events('o1', posted.eventId, AbortSignal.timeout(120_000))) {
    // Once: a retry of the turn would report its progress again.
    if (e.type === 'progress' && !killed) {
      killed = true;
      await s3.kill();
      // The backend's own retries of one call give up after about 10 s: the commit must wait on.
      await new Promise((resolve) => setTimeout(resolve, 14_000));
      await s3.restart();
    }
    if (e.type === 'reply' || e.type === 'failed') {
      outcome = e.type;
      break;
    }
  }
  assert.equal(outcome, 'reply');
  const turns = await store.listTurns('o1');
  assert.deepEqual(
    turns.map((x) => [x.attempt, x.status]),
    [[1, 'committed']],
    'one turn, committed on its first try',
  );
  const [message] = (await store.listMessages('o1', 0, 10)).filter((m) => m.direction === 'in');
  assert.equal(message!.tries, 1, 'no try was spent on the outage');
  assert.match(await logOf(a), /"step":"upload the layer"[^\n]*Blob store away; trying again/);
  assert.equal((await store.getWorkspaceChain('o1')).version, 1);
});
