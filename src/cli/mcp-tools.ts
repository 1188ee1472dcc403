/**
 * The tools `berth mcp` offers, each one call (or a few) of the berth SDK with the caller's
 * token: the server is a client of the API and holds no state of its own. A tool answers
 * JSON as text; a berth failure answers an MCP tool error (isError) whose JSON carries
 * berth's catalogue code, its message and the hint saying what to do.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Berth } from '../client/index.js';
import { BerthError, EXEC_MAX_TIMEOUT_MS, isBerthError, SESSION_STATUSES } from '../core/index.js';
import {
  MAX_READ_BYTES,
  MAX_WRITE_BYTES,
  readWorkspaceFile,
  runCollected,
  writeWorkspaceFile,
} from './mcp-exec.js';

/** How long send_message waits for the reply when the call names no timeout. */
const REPLY_DEFAULT_TIMEOUT_MS = 120_000;

const session = z.string().min(1).describe('Session id');
const path = z.string().describe('File path relative to the workspace, e.g. "src/main.py"');
const encoding = z
  .enum(['utf8', 'base64'])
  .default('utf8')
  .describe('"utf8" for text, "base64" for any bytes');

function answer(value: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value, null, 2) }] };
}

function toolError(err: unknown): CallToolResult {
  const e = isBerthError(err) ? err : new BerthError('INTERNAL', String((err as Error)?.message ?? err));
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(e.toJSON().error, null, 2) }] };
}

/** Runs a tool's body; whatever it throws becomes a tool error, never a protocol error. */
function guarded<A>(body: (args: A) => Promise<unknown>): (args: A) => Promise<CallToolResult> {
  return async (args) => {
    try {
      return answer(await body(args));
    } catch (err) {
      return toolError(err);
    }
  };
}

async function sendAndWait(
  berth: Berth,
  a: { session: string; text: string; agent?: string; timeoutMs: number },
) {
  const posted = await berth.sessions.post(a.session, {
    text: a.text,
    ...(a.agent ? { agent: a.agent } : {}),
  });
  try {
    const reply = await berth.waitForReply(a.session, posted, { signal: AbortSignal.timeout(a.timeoutMs) });
    return { text: reply.text, data: reply.data, messageId: posted.message.id, replyId: reply.messageId };
  } catch (err) {
    if ((err as Error).name !== 'TimeoutError') throw err;
    throw new BerthError(
      'REPLY_WAIT_TIMEOUT',
      `No reply to message ${posted.message.id} of session ${a.session} within ${a.timeoutMs} ms (send_message)`,
      { cause: err },
    );
  }
}

/** A new MCP server whose tools act through `berth` (one per caller token on HTTP). */
export function berthMcpServer(berth: Berth, version: string): McpServer {
  const server = new McpServer({ name: 'berth', version });
  server.registerTool(
    'send_message',
    {
      description:
        "Send a message to a berth session (created with `agent` if new) and wait for the agent's reply. On timeout the message stays queued or running: it is not cancelled.",
      inputSchema: {
        session,
        text: z.string().min(1).describe('The message'),
        agent: z.string().min(1).optional().describe('Agent of a new session'),
        timeoutMs: z.number().int().min(1).max(EXEC_MAX_TIMEOUT_MS).default(REPLY_DEFAULT_TIMEOUT_MS),
      },
    },
    guarded((a) => sendAndWait(berth, a)),
  );
  server.registerTool(
    'exec',
    {
      description:
        "Run a shell command (/bin/sh -c) in the session's live sandbox, in its workspace, and return stdout, stderr and exitCode. Needs a bound sandbox: a resident agent's session keeps one between turns.",
      inputSchema: {
        session,
        command: z.string().min(1).describe('A shell command line'),
        cwd: z.string().optional().describe('Working directory relative to the workspace'),
        env: z.record(z.string()).optional().describe('Extra environment variables'),
        timeoutMs: z.number().int().min(1).max(EXEC_MAX_TIMEOUT_MS).optional(),
      },
    },
    guarded(({ session: id, ...body }) => runCollected(berth, id, body)),
  );
  server.registerTool(
    'read_file',
    {
      description: `Read a file of the session's workspace from its live sandbox (done through exec for now, so it needs a bound sandbox), at most ${MAX_READ_BYTES} bytes a call: a larger file is read in pages (pass \`next\` as \`offset\`). Paths are relative to the workspace; absolute paths and '..' are refused.`,
      inputSchema: {
        session,
        path,
        encoding,
        offset: z.number().int().min(0).default(0).describe('First byte to read'),
        length: z.number().int().min(1).max(MAX_READ_BYTES).default(MAX_READ_BYTES),
      },
    },
    guarded(async (a) => {
      const page = await readWorkspaceFile(berth, a.session, a.path, a.offset, a.length);
      return {
        path: a.path,
        size: page.size,
        offset: a.offset,
        next: page.next,
        encoding: a.encoding,
        content: page.bytes.toString(a.encoding),
      };
    }),
  );
  server.registerTool(
    'write_file',
    {
      description: `Write a file in the session's workspace in its live sandbox (done through exec for now, so it needs a bound sandbox), creating its directories. At most ${MAX_WRITE_BYTES} bytes a call: write a larger file in parts with append. Paths are relative to the workspace; absolute paths and '..' are refused.`,
      inputSchema: {
        session,
        path,
        content: z.string().describe('The file content, in `encoding`'),
        encoding,
        append: z.boolean().default(false).describe('Add to the end of the file instead of replacing it'),
      },
    },
    guarded(async (a) => {
      const bytes = Buffer.from(a.content, a.encoding);
      await writeWorkspaceFile(berth, a.session, a.path, bytes, a.append);
      return { path: a.path, written: bytes.length, append: a.append };
    }),
  );
  server.registerTool(
    'list_sessions',
    {
      description:
        'List berth sessions the token may see, one page in creation order (pass `next` as `after`).',
      inputSchema: {
        status: z.enum(SESSION_STATUSES).optional(),
        agent: z.string().min(1).optional(),
        after: z.string().min(1).optional(),
        limit: z.number().int().min(1).max(500).default(100),
      },
    },
    guarded((query) => berth.sessions.page(query)),
  );
  server.registerTool(
    'session_status',
    { description: "A session's status, agent, queue position and hold (if any).", inputSchema: { session } },
    guarded((a) => berth.sessions.get(a.session)),
  );
  server.registerTool(
    'interrupt',
    {
      description:
        "Stop the session's running turn now: its workspace changes are discarded and its messages end interrupted.",
      inputSchema: { session },
    },
    guarded((a) => berth.sessions.interrupt(a.session)),
  );
  server.registerTool(
    'fork_session',
    {
      description:
        "Start a new session from one of a session's retained workspace versions (default its current one).",
      inputSchema: {
        session,
        as: z.string().min(1).optional().describe('Id of the new session (else one is generated)'),
        fromVersion: z.number().int().min(0).optional(),
      },
    },
    guarded((a) =>
      berth.sessions.fork(a.session, a.as, a.fromVersion === undefined ? {} : { fromVersion: a.fromVersion }),
    ),
  );
  server.registerTool(
    'delete_session',
    { description: 'Stop a session and archive it: it takes no more messages.', inputSchema: { session } },
    guarded((a) => berth.sessions.delete(a.session)),
  );
  return server;
}
