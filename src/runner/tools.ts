/**
 * The tools a model agent calls, provider-neutral: each has a JSON schema (sent to the
 * model as is) and runs inside the sandbox. Relative paths are under the workspace; the
 * sandbox itself is the boundary (read-only root, no network), so a tool may read any
 * path the sandbox user can. Every result is text, cut at the turn's output limit, and a
 * failure is a result the model sees (is_error), never a failed turn: the model decides
 * what to do about it. State keys under `berth.` are the runner's own. The storage_*
 * tools reach the agent's mediated storage through the gateway: what they may
 * do is what the operator granted the agent; a refusal is a tool error.
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { LeftRunning } from '../core/protocol.js';
import { type GatewayClient, GatewayError } from './gateway-client.js';
import { leftRunningOf, runShell } from './processes.js';
import { StorageClient } from './storage-client.js';

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
  /** The sandbox's gateway: schedules (and any other host service) go through it. */
  gateway: GatewayClient;
  /** A resident agent's sandbox: background processes a command leaves live on after the turn. */
  resident: boolean;
}

export interface ToolResult {
  output: string;
  isError: boolean;
}

const str = (description: string) => ({ type: 'string', description });
const storageKey = str('object key: a relative path such as photos/2026/a.jpg');

export const TOOLS: ToolSpec[] = [
  {
    name: 'bash',
    description:
      'Run a shell command (/bin/sh -c) in the workspace. Returns the exit code, stdout and stderr once the command itself exits; background processes it started (cmd &) keep running and are listed. A command writing too much output is killed (pipe long output through head or into a file); each call has a time limit; processes do not outlive the turn unless the agent is resident. There is no network.',
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
  {
    name: 'schedule_message',
    description:
      'Schedule a recurring message to this session: at every time the cron expression (5 fields: minute hour day-of-month month day-of-week) matches in the time zone, the message arrives as a new turn. Kept only if this turn completes; the agent may have only a few live schedules.',
    schema: {
      type: 'object',
      properties: {
        cron: str('cron expression, e.g. "0 9 * * 1-5"'),
        tz: str('IANA time zone, e.g. "Europe/Paris" (default UTC)'),
        message: str('the message the session will receive'),
        missed: {
          type: 'string',
          enum: ['once', 'skip'],
          description: 'a run missed while the host was down: send once, or skip (default once)',
        },
      },
      required: ['cron', 'message'],
    },
  },
  {
    name: 'schedule_list',
    description: "List this session's schedules (and those this turn made, kept if it completes).",
    schema: { type: 'object', properties: {}, required: [] },
  },
  {
    name: 'storage_list',
    description:
      "List objects of the agent's persistent storage (kept across sessions, outside the workspace) whose key starts with prefix: key, size, sha256, update time. Needs a list grant on that prefix.",
    schema: {
      type: 'object',
      properties: {
        prefix: str('key prefix, e.g. photos/ (default: all)'),
        after: str('continue a long listing after this key'),
      },
      required: [],
    },
  },
  {
    name: 'storage_get',
    description:
      'Read an object from persistent storage as text (long content is cut), or, with path, save the whole object to that workspace file.',
    schema: {
      type: 'object',
      properties: { key: storageKey, path: str('workspace file to save the object to (optional)') },
      required: ['key'],
    },
  },
  {
    name: 'storage_put',
    description:
      'Write an object to persistent storage, replacing any object of that key: the given text content, or the workspace file at path. Kept even if the turn fails.',
    schema: {
      type: 'object',
      properties: {
        key: storageKey,
        content: str('text to store (give content or path)'),
        path: str('workspace file to store (give content or path)'),
      },
      required: ['key'],
    },
  },
  {
    name: 'storage_delete',
    description: 'Delete an object from persistent storage.',
    schema: { type: 'object', properties: { key: storageKey }, required: ['key'] },
  },
  {
    name: 'storage_stat',
    description: "An object's size, sha256 and update time, without its content.",
    schema: { type: 'object', properties: { key: storageKey }, required: ['key'] },
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
  const storage = new StorageClient(ctx.gateway);
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
      const result = `${status}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}${leftRunningNote(leftRunningOf(r.leftRunning, ctx.resident))}`;
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
    case 'schedule_message': {
      const body = { cron: text('cron'), message: text('message'), ...pick(args, 'tz', 'missed') };
      const made = await ctx.gateway.call<{ nextRunAt: number }>('POST', '/v1/schedules', body);
      return `scheduled; first run at ${new Date(made.body!.nextRunAt).toISOString()} (kept if this turn completes)`;
    }
    case 'schedule_list': {
      const listed = await ctx.gateway.call<{ schedules: unknown[]; heldUntilCommit: unknown[] }>(
        'GET',
        '/v1/schedules',
      );
      return JSON.stringify(listed.body);
    }
    case 'storage_list': {
      const optional = (key: string) => (args[key] === undefined ? '' : text(key));
      const listing = await storage.list(optional('prefix'), optional('after'));
      const lines = listing.objects.map(
        (o) => `${o.key}\t${o.size} bytes\tsha256 ${o.sha256}\t${new Date(o.updatedAt).toISOString()}`,
      );
      if (listing.next !== null) lines.push(`(more: call again with after=${JSON.stringify(listing.next)})`);
      return lines.join('\n') || '(no objects)';
    }
    case 'storage_get': {
      if (args.path !== undefined) {
        const file = path();
        await mkdir(dirname(file), { recursive: true });
        const entry = await storage.download(text('key'), file);
        return `saved ${text('key')} (${entry.size} bytes, sha256 ${entry.sha256}) to ${text('path')}`;
      }
      // Room is left for the note saying the content was cut, so the model learns of `path`.
      const room = Math.max(ctx.maxOutputBytes - 160, ctx.maxOutputBytes >> 1);
      const { entry, content } = await storage.read(text('key'), room);
      if (entry.size <= content.length) return content.toString('utf8');
      return `${content.toString('utf8')}\n[cut at ${content.length} of ${entry.size} bytes: pass path to save the whole object to a file]`;
    }
    case 'storage_put': {
      const hasContent = args.content !== undefined;
      if (hasContent === (args.path !== undefined))
        throw new Error('storage_put needs either "content" or "path", not both');
      const body = hasContent ? { content: Buffer.from(text('content')) } : { file: path() };
      const entry = await storage.put(text('key'), body);
      return `stored ${entry.key} (${entry.size} bytes, sha256 ${entry.sha256})`;
    }
    case 'storage_delete':
      await storage.delete(text('key'));
      return `deleted ${text('key')}`;
    case 'storage_stat': {
      const entry = await storage.stat(text('key'));
      return `${entry.key}\t${entry.size} bytes\tsha256 ${entry.sha256}\t${new Date(entry.updatedAt).toISOString()}`;
    }
    default:
      throw new Error(`there is no tool named ${JSON.stringify(name)}`);
  }
}

/** The bash result's last line when the command left processes running: which, and what becomes of them. */
function leftRunningNote(left: LeftRunning | undefined): string {
  if (!left) return '';
  const fate = left.fate === 'kept-resident' ? 'they keep running' : 'they are killed when the turn ends';
  const processes = left.processes.map((p) => `${p.pid} ${p.command}`).join('; ');
  return `\nstill running (${fate}): ${processes}`;
}

/** The optional string arguments that are present. */
function pick(args: Record<string, unknown>, ...keys: string[]): Record<string, string> {
  return Object.fromEntries(
    keys.filter((k) => typeof args[k] === 'string').map((k) => [k, args[k] as string]),
  );
}

function cut(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  return `${Buffer.from(text).subarray(0, maxBytes).toString('utf8')}\n[cut at ${maxBytes} bytes]`;
}
