/**
 * `berth mcp` driven by the MCP SDK's own client against a real host (real Docker, SQLite,
 * HTTP): on stdio (the client spawns `node bin/berth.js mcp`) and on streamable HTTP (a
 * `berth mcp --transport http` process of its own, holding no token: each request's is
 * used, and one berth refuses is 401). A resident `command` agent keeps a live sandbox
 * between turns, so exec and the file tools reach it.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Berth } from '../src/client/index.js';
import { eventually } from './helpers/processes.js';
import { startTestHost } from './helpers/test-host.js';

/** Calls a tool; answers its JSON and whether it is a tool error. */
async function call(client: Client, name: string, args: Record<string, unknown>) {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const [first] = r.content;
  assert.equal(first?.type, 'text');
  return { isError: r.isError === true, json: JSON.parse(first.type === 'text' ? first.text : '') };
}

/** Starts `berth mcp --transport http` on a free port; answers its endpoint once it says it serves. */
async function httpServer(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    ['bin/berth.js', 'mcp', '--transport', 'http', '--listen', '127.0.0.1:0'],
    {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let said = '';
  for await (const chunk of child.stderr!) {
    said += String(chunk);
    const m = /serving (http:\S+)/.exec(said);
    if (m) return { child, url: m[1]! };
  }
  throw new Error(`berth mcp --transport http stopped: ${said}`);
}

const TOOLS = [
  'delete_session',
  'exec',
  'fork_session',
  'interrupt',
  'list_sessions',
  'read_file',
  'send_message',
  'session_status',
  'write_file',
];

test('berth mcp on stdio and streamable HTTP: tools, send_message, exec, files round-trip, the workspace confined, tokens checked', async (t) => {
  const { host } = await startTestHost(t);
  const admin = new Berth({ url: host.url, token: host.adminToken });
  const { token } = await admin.tokens.create({ tenant: 'mcp', label: 'test' });
  await new Berth({ url: host.url, token }).agents.create({
    name: 'res',
    provider: 'command',
    mode: 'resident',
  });
  const env = { ...process.env, BERTH_URL: host.url, BERTH_TOKEN: token };

  const stdio = new Client({ name: 'test', version: '1' });
  await stdio.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: ['bin/berth.js', 'mcp'],
      env,
      stderr: 'inherit',
    }),
  );
  t.after(() => stdio.close());
  assert.deepEqual((await stdio.listTools()).tools.map((x) => x.name).sort(), TOOLS);

  const reply = await call(stdio, 'send_message', { session: 'm1', text: 'echo hi from mcp', agent: 'res' });
  assert.equal(reply.isError, false, JSON.stringify(reply.json));
  assert.equal(reply.json.text, 'hi from mcp\n');

  const ran = await call(stdio, 'exec', { session: 'm1', command: 'echo out; echo err >&2; exit 3' });
  assert.deepEqual(ran.json, { stdout: 'out\n', stderr: 'err\n', exitCode: 3, timedOut: false });

  // The most one write takes, then a part appended; read back in pages.
  const bytes = randomBytes(64 * 1024 + 1000);
  const parts = [bytes.subarray(0, 64 * 1024), bytes.subarray(64 * 1024)];
  for (const [i, part] of parts.entries()) {
    const wrote = await call(stdio, 'write_file', {
      session: 'm1',
      path: 'd/x.bin',
      content: part.toString('base64'),
      encoding: 'base64',
      append: i > 0,
    });
    assert.deepEqual(wrote.json, { path: 'd/x.bin', written: part.length, append: i > 0 });
  }
  const pages: Buffer[] = [];
  for (let offset: number | null = 0; offset !== null; ) {
    const page = await call(stdio, 'read_file', {
      session: 'm1',
      path: 'd/x.bin',
      encoding: 'base64',
      offset,
    });
    assert.equal(page.isError, false, JSON.stringify(page.json));
    assert.equal(page.json.size, bytes.length);
    pages.push(Buffer.from(page.json.content, 'base64'));
    offset = page.json.next;
  }
  assert.equal(pages.length, 3, 'pages of 32 KiB');
  assert.ok(Buffer.concat(pages).equals(bytes), 'the bytes read back are the bytes written');
  const inSandbox = await call(stdio, 'exec', { session: 'm1', command: 'wc -c < d/x.bin' });
  assert.equal(inSandbox.json.stdout.trim(), String(bytes.length), 'the file is in the sandbox workspace');
  const text = await call(stdio, 'read_file', { session: 'm1', path: 'd/t.txt' });
  assert.equal(text.json.code, 'WORKSPACE_PATH_NOT_FOUND');
  await call(stdio, 'write_file', { session: 'm1', path: 'd/t.txt', content: 'héllo\n' });
  assert.equal((await call(stdio, 'read_file', { session: 'm1', path: 'd/t.txt' })).json.content, 'héllo\n');

  for (const path of ['../etc/passwd', '/etc/passwd']) {
    const refused = await call(stdio, 'read_file', { session: 'm1', path });
    assert.equal(refused.isError, true);
    assert.equal(refused.json.code, 'INVALID_INPUT');
    assert.match(refused.json.hint, /relative to the workspace/);
  }
  const unknown = await call(stdio, 'session_status', { session: 'nobody' });
  assert.deepEqual([unknown.isError, unknown.json.code], [true, 'SESSION_NOT_FOUND']);

  // A reply not come by the timeout: the wait ends, the message runs on until interrupted.
  const late = await call(stdio, 'send_message', { session: 'm1', text: 'sleep 600', timeoutMs: 200 });
  assert.deepEqual([late.isError, late.json.code], [true, 'REPLY_WAIT_TIMEOUT']);
  await eventually('the sleep running', async () =>
    (await call(stdio, 'session_status', { session: 'm1' })).json.status === 'running' ? true : undefined,
  );
  const stopped = await call(stdio, 'interrupt', { session: 'm1' });
  assert.equal(stopped.isError, false, JSON.stringify(stopped.json));

  // HTTP: the server process holds no token of its own; every request brings one.
  const { child, url } = await httpServer({ ...env, BERTH_TOKEN: '' });
  t.after(async () => {
    child.kill('SIGKILL');
    await once(child, 'exit');
  });
  const http = new Client({ name: 'test', version: '1' });
  await http.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  t.after(() => http.close());
  const status = await call(http, 'session_status', { session: 'm1' });
  assert.equal(status.json.id, 'm1');
  const listed = await call(http, 'list_sessions', {});
  assert.deepEqual(
    listed.json.sessions.map((s: { id: string }) => s.id),
    ['m1'],
  );

  const init = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
  for (const authorization of [undefined, 'Bearer not-a-berth-token']) {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(authorization ? { authorization } : {}),
      },
      body: JSON.stringify(init),
    });
    assert.equal(res.status, 401, String(authorization));
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'API_TOKEN_INVALID');
  }
});
