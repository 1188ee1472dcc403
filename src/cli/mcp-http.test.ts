/**
 * `berth mcp --transport http` in front of a real berth API (real SQLite, real HTTP), with
 * the MCP SDK's own client: the token checked against berth before the MCP layer (401 for
 * none or one berth refuses, 503 when berth does not answer), tools acting with the
 * caller's token, and berth's failures as tool errors carrying the code and the fix.
 */
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { listenMemoryApi } from '../../test/helpers/memory-api.js';
import { issueToken } from '../api/api-tokens.js';
import { agentSpecSchema } from '../core/index.js';
import { listenMcpHttp } from './mcp-http.js';

async function mcpAt(t: import('node:test').TestContext, apiUrl: string): Promise<string> {
  const server: Server = await listenMcpHttp('127.0.0.1:0', apiUrl, '0.0.0');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
}

/** A raw MCP request: its status and, when JSON, its error code. */
async function raw(url: string, method: string, authorization?: string) {
  // A guard, not a measure: an endpoint that streams where it should refuse fails, not hangs.
  const res = await fetch(url, {
    method,
    signal: AbortSignal.timeout(10_000),
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(authorization ? { authorization } : {}),
    },
    ...(method === 'POST' ? { body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) } : {}),
  });
  const text = await res.text();
  return { status: res.status, code: text.startsWith('{') ? JSON.parse(text).error?.code : undefined };
}

async function call(client: Client, name: string, args: Record<string, unknown>) {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const first = r.content[0];
  return { isError: r.isError === true, json: JSON.parse(first?.type === 'text' ? first.text : 'null') };
}

test('berth mcp over HTTP: tokens checked against berth, tools act with the caller token, failures carry the code and fix', async (t) => {
  const { url: apiUrl, store, close } = await listenMemoryApi(t);
  const now = Date.now();
  const { token } = await issueToken(store, 'acme', '', now);
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), now, 'acme');
  await store.createAgent(agentSpecSchema.parse({ name: 'gsh', provider: 'command' }), now, 'globex');
  await store.enqueueMessage({ sessionId: 'a1', agent: 'sh', text: 'true', now, tenant: 'acme' });
  await store.enqueueMessage({ sessionId: 'g1', agent: 'gsh', text: 'true', now, tenant: 'globex' });
  const url = await mcpAt(t, apiUrl);

  assert.deepEqual(await raw(url, 'POST'), { status: 401, code: 'API_TOKEN_INVALID' });
  assert.deepEqual(await raw(url, 'POST', 'Bearer not-a-token'), { status: 401, code: 'API_TOKEN_INVALID' });
  assert.equal((await raw(url, 'GET', `Bearer ${token}`)).status, 405, 'stateless: no stream to resume');
  assert.deepEqual(await raw(url.replace('/mcp', '/other'), 'POST', `Bearer ${token}`), {
    status: 404,
    code: 'NOT_FOUND',
  });

  const client = new Client({ name: 'test', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  t.after(() => client.close());
  const listed = await call(client, 'list_sessions', {});
  assert.deepEqual(
    listed.json.sessions.map((s: { id: string }) => s.id),
    ['a1'],
    "another tenant's sessions stay hidden",
  );
  const other = await call(client, 'session_status', { session: 'g1' });
  assert.deepEqual([other.isError, other.json.code], [true, 'SESSION_NOT_FOUND']);
  const idle = await call(client, 'exec', { session: 'a1', command: 'ls' });
  assert.deepEqual([idle.isError, idle.json.code], [true, 'NO_LIVE_SANDBOX']);
  assert.match(idle.json.hint, /resident/);
  for (const path of ['../x', '/etc/passwd', 'a/../../x', '']) {
    const refused = await call(client, 'write_file', { session: 'a1', path, content: 'x' });
    assert.deepEqual([refused.isError, refused.json.code], [true, 'INVALID_INPUT'], path);
    assert.match(refused.json.hint, /relative to the workspace/);
  }
  const deleted = await call(client, 'delete_session', { session: 'a1' });
  assert.equal(deleted.json.id, 'a1');

  await close();
  const gone = await raw(url, 'POST', `Bearer ${token}`);
  assert.deepEqual(
    gone,
    { status: 503, code: 'HOST_UNREACHABLE' },
    'a berth that does not answer is not a 401',
  );
});
