import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { GatewayClient } from './gateway-client.js';
import { runTool, type ToolContext } from './tools.js';

async function context(t: TestContext): Promise<ToolContext & { state: Map<string, unknown> }> {
  const workspace = await mkdtemp(join(tmpdir(), 'berth-tools-'));
  t.after(() => rm(workspace, { recursive: true, force: true }));
  const state = new Map<string, unknown>();
  return {
    workspace,
    maxOutputBytes: 64,
    bashTimeoutMs: 300,
    attempt: 1,
    state,
    getState: async (key) => state.get(key),
    putState: async (key, value) => void state.set(key, value),
    gateway: new GatewayClient(join(workspace, 'no-gateway.sock'), 'token'),
    resident: false,
  };
}

test('file tools: write, read, list, edit (exactly one occurrence)', async (t) => {
  const ctx = await context(t);
  assert.deepEqual(await runTool('write_file', { path: 'd/a.txt', content: 'one two one' }, ctx), {
    output: 'wrote 11 bytes to d/a.txt',
    isError: false,
  });
  assert.equal((await runTool('read_file', { path: 'd/a.txt' }, ctx)).output, 'one two one');
  assert.equal((await runTool('list_dir', {}, ctx)).output, 'd/');
  const twice = await runTool('edit_file', { path: 'd/a.txt', old_string: 'one', new_string: '1' }, ctx);
  assert.deepEqual(twice, {
    output: 'error: old_string occurs 2 times in d/a.txt; it must occur once',
    isError: true,
  });
  await runTool('edit_file', { path: 'd/a.txt', old_string: 'two', new_string: '$&2' }, ctx);
  assert.equal(await readFile(join(ctx.workspace, 'd/a.txt'), 'utf8'), 'one $&2 one');
  assert.match((await runTool('read_file', { path: 'missing' }, ctx)).output, /^error: ENOENT/);
  assert.match((await runTool('read_file', {}, ctx)).output, /read_file needs a string "path"/);
  assert.match((await runTool('nope', {}, ctx)).output, /no tool named "nope"/);
  assert.match(
    (await runTool('bash', '{"command": "ec', ctx)).output,
    /arguments are not a JSON object: "\{/,
  );
});

test('bash: exit codes, killed past the output limit or the time limit, other results cut', async (t) => {
  const ctx = await context(t);
  assert.deepEqual(await runTool('bash', { command: 'echo hi' }, ctx), {
    output: 'exit code 0\nstdout:\nhi\n\nstderr:\n',
    isError: false,
  });
  const failed = await runTool('bash', { command: 'echo oops >&2; exit 3' }, ctx);
  assert.equal(failed.isError, true);
  assert.match(failed.output, /exit code 3[\s\S]*oops/);
  const long = await runTool('bash', { command: 'yes | head -c 10000' }, ctx);
  assert.deepEqual(long, {
    output: 'error: a job wrote more than 64 bytes to stdout and was killed',
    isError: true,
  });
  await runTool('write_file', { path: 'big', content: 'x'.repeat(100) }, ctx);
  assert.match((await runTool('read_file', { path: 'big' }, ctx)).output, /^x{64}\n\[cut at 64 bytes\]$/);
  const slow = await runTool('bash', { command: 'sleep 30 | cat' }, ctx);
  assert.equal(slow.isError, true);
  assert.match(slow.output, /killed after the 300 ms time limit/);
});

test('bash: a command returns when it exits, naming what it left running and what becomes of it', {
  timeout: 30_000,
}, async (t) => {
  for (const resident of [false, true]) {
    const ctx = { ...(await context(t)), maxOutputBytes: 4096, resident };
    const r = await runTool('bash', { command: '(tail -f /dev/null &); sleep 1000 & echo started' }, ctx);
    const pids = [...r.output.matchAll(/(\d+) (?:tail -f \/dev\/null|sleep 1000)/g)].map((m) => Number(m[1]));
    t.after(() => {
      for (const pid of pids) process.kill(pid, 'SIGKILL');
    });
    assert.equal(r.isError, false);
    const fate = resident ? 'they keep running' : 'they are killed when the turn ends';
    assert.match(r.output, /^exit code 0\nstdout:\nstarted\n\nstderr:\n\nstill running \((.*)\): \d+ /);
    assert.equal(/still running \((.*)\)/.exec(r.output)![1], fate);
    assert.equal(pids.length, 2, r.output);
  }
});

test('state tools: put and get through the session state, berth.* reserved', async (t) => {
  const ctx = await context(t);
  assert.equal((await runTool('state_get', { key: 'k' }, ctx)).output, '(not set)');
  await runTool('state_put', { key: 'k', value: { n: 1 } }, ctx);
  assert.equal((await runTool('state_get', { key: 'k' }, ctx)).output, '{"n":1}');
  const reserved = await runTool('state_put', { key: 'berth.conversation', value: [] }, ctx);
  assert.equal(reserved.isError, true);
  assert.equal(ctx.state.has('berth.conversation'), false);
});
