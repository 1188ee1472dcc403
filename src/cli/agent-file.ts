/**
 * Agent files: YAML or JSON (YAML 1.2 reads JSON as is), exactly the API's agent schema.
 * `show` writes what `apply` reads back unchanged: the whole resolved spec, defaults
 * included, so applying it again changes nothing.
 */
import { readFile } from 'node:fs/promises';
import { parse, stringify } from 'yaml';
import {
  type AgentChange,
  type AgentIssue,
  type AgentSpec,
  BerthError,
  checkAgentSpec,
} from '../core/index.js';

export type AgentFileFormat = 'yaml' | 'json';

async function readAll(file: string): Promise<string> {
  if (file !== '-') return readFile(file, 'utf8');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The file's content as data; a file that is not YAML or JSON throws INVALID_INPUT with the line. */
export async function readAgentFile(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readAll(file);
  } catch (err) {
    throw new BerthError('INVALID_INPUT', `Cannot read agent file ${file}: ${(err as Error).message}`, {
      cause: err,
      hint: 'Give the path of a YAML or JSON agent file (berth agent show NAME -o yaml writes one), or - for stdin.',
    });
  }
  try {
    return parse(text);
  } catch (err) {
    throw new BerthError(
      'INVALID_INPUT',
      `Agent file ${file} is not YAML or JSON: ${(err as Error).message}`,
      {
        cause: err,
        hint: 'Correct the YAML or JSON at the line shown, then apply it again.',
      },
    );
  }
}

/** Every issue of the file's content, or none. */
export function agentFileIssues(content: unknown): AgentIssue[] {
  const check = checkAgentSpec(content);
  return check.ok ? [] : check.issues;
}

export function formatAgentSpec(spec: AgentSpec, format: AgentFileFormat): string {
  return format === 'json' ? `${JSON.stringify(spec, null, 2)}\n` : stringify(spec);
}

function shown(value: unknown): string {
  return value === undefined ? '(unset)' : JSON.stringify(value);
}

/** "  memoryMb: 512 -> 1024", one line per change. */
export function changeLines(changes: readonly AgentChange[]): string[] {
  return changes.map((c) => `  ${c.path}: ${shown(c.from)} -> ${shown(c.to)}`);
}
