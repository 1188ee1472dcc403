/**
 * The tools a model agent calls, provider-neutral: each has a JSON schema (sent to the
 * model as is) and runs inside the sandbox. Relative paths are under the workspace; the
 * sandbox itself is the boundary (read-only root, no network), so a tool may read any
 * path the sandbox user can. Every result is text, cut at the turn's output limit, and a
 * failure is a result the model sees (is_error), never a failed turn: the model decides
 * what to do about it. State keys under `berth.` are the runner's own.
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { GatewayError } from './gateway-client.js';
import { runShell } from './processes.js';

export interface ToolSpec {
  name: string;
  description: string;
  schema: { type: 'object'; properties: Record<string, unknown>; required: string[] };
}

export interface ToolContext {
  workspace: string;
  maxOutputBytes: number;
  bashTimeoutMs: number;
  attempt: number;
  getState(key: string): Promise<unknown>;
  putState(key: string, value: unknown): Promise<void>;
}

export interface ToolResult {
  output: string;
  isError: boolean;
}

const str = (description: string) => ({ type: 'string', description });

export const TOOLS: ToolSpec[] = [
  {
    name: 'bash',
    description:
      'Run a shell command (/bin/sh -c) in the workspace. Returns the exit code, stdout and stderr. A command writing too much output is killed (pipe long output through head or into a file); each call has a time limit; processes do not outlive the turn. There is no network.',
    schema: { type: 'object', properties: { command: str('the command line') }, required: ['command'] },
  },
  {
    name: 'read_file',
    description: 'Read a text file (path relative to the workspace).',
    schema: { type: 'object', properties: { path: str('file path') }, required: ['path'] },
  },
  {
    name: 'write_file',
    description: 'Create or replace a file with the given content, creating parent directories.',
    schema: {
      type: 'object',
      properties: { path: str('file path'), content: str('the whole new content') },
      required: ['path', 'content'],
    },
  },
  {
    name: 'list_dir',
    description: 'List a directory (default: the workspace); directories end with "/".',
    schema: { type: 'object', properties: { path: str('directory path') }, required: [] },
  },
  {
    name: 'edit_file',
    description:
      'Replace one exact occurrence of old_string with new_string in a file; old_string must occur exactly once.',
    schema: {
      type: 'object',
      properties: {
        path: str('file path'),
        old_string: str('text to replace'),
        new_string: str('replacement'),
      },
      required: ['path', 'old_string', 'new_string'],
    },
  },
  {
    name: 'state_get',
    description: "Read a value from the session's durable state (committed with each turn).",
    schema: {
      type: 'object',
      properties: { key: str('state key: letters, digits, _ . : -') },
      required: ['key'],
    },
  },
  {
    name: 'state_put',
    description:
      "Write a JSON value into the session's durable state; it is kept only if the turn completes. null deletes.",
    schema: {
      type: 'object',
      properties: {
        key: str('state key: letters, digits, _ . : -'),
        value: { description: 'any JSON value' },
      },
      required: ['key', 'value'],
    },
  },
];

export async function runTool(name: string, input: unknown, ctx: ToolContext): Promise<ToolResult> {
  try {
    if (!input || typeof input !== 'object' || Array.isArray(input))
      throw new Error(`the arguments are not a JSON object: ${String(JSON.stringify(input)).slice(0, 200)}`);
    const args = input as Record<string, unknown>;
    return { output: cut(await dispatch(name, args, ctx), ctx.maxOutputBytes), isError: false };
  } catch (err) {
    // A replaced or revoked sandbox must stop, not tell the model.
    if (err instanceof GatewayError && (err.status === 401 || err.status === 409)) throw err;
    return { output: cut(`error: ${(err as Error).message}`, ctx.maxOutputBytes), isError: true };
  }
}

async function dispatch(name: string, args: Record<string, unknown>, ctx: ToolContext): Promise<string> {
  const text = (key: string): string => {
    const value = args[key];
    if (typeof value !== 'string') throw new Error(`${name} needs a string "${key}"`);
    return value;
  };
  const path = (key = 'path') => resolve(ctx.workspace, text(key));
  switch (name) {
    case 'bash': {
      const r = await runShell(text('command'), {
        cwd: ctx.workspace,
        maxOutputBytes: ctx.maxOutputBytes,
        attempt: ctx.attempt,
        timeoutMs: ctx.bashTimeoutMs,
      });
      const status = r.timedOut
        ? `killed after the ${ctx.bashTimeoutMs} ms time limit`
        : `exit code ${r.exitCode ?? r.signal}`;
      // A job writing past the output limit is killed (runShell rejects): a tool error the model sees.
      const result = `${status}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
      if (r.exitCode !== 0) throw new Error(result);
      return result;
    }
    case 'read_file':
      return await readFile(path(), 'utf8');
    case 'write_file': {
      const file = path();
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, text('content'));
      return `wrote ${Buffer.byteLength(text('content'))} bytes to ${text('path')}`;
    }
    case 'list_dir': {
      const dir = args.path === undefined ? ctx.workspace : path();
      const entries = await readdir(dir, { withFileTypes: true });
      return (
        entries
          .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
          .sort()
          .join('\n') || '(empty)'
      );
    }
    case 'edit_file': {
      const file = path();
      const content = await readFile(file, 'utf8');
      const old = text('old_string');
      const count = old === '' ? 0 : content.split(old).length - 1;
      if (count !== 1)
        throw new Error(`old_string occurs ${count} times in ${text('path')}; it must occur once`);
      await writeFile(
        file,
        content.replace(old, () => text('new_string')),
      );
      return `edited ${text('path')}`;
    }
    case 'state_get': {
      const value = await ctx.getState(text('key'));
      return value === undefined ? '(not set)' : JSON.stringify(value);
    }
    case 'state_put': {
      const key = text('key');
      if (key.startsWith('berth.')) throw new Error('state keys starting with "berth." are reserved');
      if (!('value' in args)) throw new Error('state_put needs a "value"');
      await ctx.putState(key, args.value);
      return `put ${key}`;
    }
    default:
      throw new Error(`there is no tool named ${JSON.stringify(name)}`);
  }
}

function cut(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  return `${Buffer.from(text).subarray(0, maxBytes).toString('utf8')}\n[cut at ${maxBytes} bytes]`;
}
