/**
 * What the MCP tools run in a session's live sandbox: a command collected whole (its
 * output, its exit code), and a workspace file read or written through such a command.
 * Files go through exec because no file route reaches a live sandbox yet; the path travels
 * in an environment variable, never spliced into the shell line, and bytes as base64 so
 * that a binary file survives the stream's UTF-8 lines.
 */
import type { Berth } from '../client/index.js';
import { BerthError, type ExecRequest } from '../core/index.js';

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number | null;
  timedOut: boolean;
}

/**
 * Raw bytes one write_file call takes: base64 of it must fit one environment string
 * (Linux caps each at 128 KiB); larger files are written in parts with `append`.
 */
export const MAX_WRITE_BYTES = 64 * 1024;

/** The sandbox's answer when the file to read is not there (any other failure is EXEC_FAILED). */
const NOT_A_FILE = 44;

/** Runs the command to its end; a stream that ends in an error line throws that code. */
export async function runCollected(berth: Berth, sessionId: string, body: ExecRequest): Promise<ExecResult> {
  const out: ExecResult = { stdout: '', stderr: '', exitCode: null, timedOut: false };
  for await (const line of berth.sessions.exec(sessionId, body)) {
    if (line.type === 'error') {
      const reason = line.reason ? ` (${line.reason})` : '';
      throw new BerthError(line.code, `${line.message}${reason}`);
    }
    if (line.type === 'exit') {
      out.exitCode = line.exitCode;
      out.timedOut = line.timedOut === true;
    } else out[line.type] += line.data;
  }
  return out;
}

/** A workspace-relative path, or INVALID_INPUT naming the fix: the tools never reach outside /workspace. */
export function workspacePath(path: string, tool: string): string {
  const segments = path.split('/');
  if (path === '' || path.startsWith('/') || segments.includes('..'))
    throw new BerthError('INVALID_INPUT', `Path ${JSON.stringify(path)} leaves the workspace (${tool})`, {
      hint: 'Give a path relative to the workspace, e.g. "src/main.py": no leading "/" and no ".." segments.',
    });
  return path;
}

function failed(sessionId: string, path: string, tool: string, r: ExecResult): BerthError {
  if (r.exitCode === NOT_A_FILE)
    return new BerthError(
      'WORKSPACE_PATH_NOT_FOUND',
      `No file ${path} in session ${sessionId}'s workspace (${tool})`,
      {
        hint: 'List the directory first with the exec tool (ls -la <dir>).',
      },
    );
  return new BerthError(
    'EXEC_FAILED',
    `${tool} of ${path} in session ${sessionId} failed: ${r.stderr.trim()}`,
  );
}

/** One page of a file: its bytes from `offset`, the file's whole size, and where the next page starts (null: the end). */
export interface FilePage {
  bytes: Buffer;
  size: number;
  next: number | null;
}

/**
 * Raw bytes one read_file call answers: their base64 (and its line breaks) must stay under
 * the runner's output cap (BERTH_MAX_OUTPUT_BYTES, 64 KiB by default); a larger file is
 * read in pages.
 */
export const MAX_READ_BYTES = 32 * 1024;

export async function readWorkspaceFile(
  berth: Berth,
  sessionId: string,
  path: string,
  offset: number,
  length: number,
): Promise<FilePage> {
  const r = await runCollected(berth, sessionId, {
    command: `[ -f "$BERTH_PATH" ] || exit ${NOT_A_FILE}; wc -c < "$BERTH_PATH"; tail -c +"$BERTH_FROM" "$BERTH_PATH" | head -c "$BERTH_LENGTH" | base64`,
    env: {
      BERTH_PATH: workspacePath(path, 'read_file'),
      BERTH_FROM: String(offset + 1),
      BERTH_LENGTH: String(Math.min(length, MAX_READ_BYTES)),
    },
  });
  if (r.exitCode !== 0) throw failed(sessionId, path, 'read_file', r);
  const newline = r.stdout.indexOf('\n');
  const size = Number(r.stdout.slice(0, newline).trim());
  const bytes = Buffer.from(r.stdout.slice(newline + 1), 'base64');
  const end = offset + bytes.length;
  return { bytes, size, next: end < size ? end : null };
}

export async function writeWorkspaceFile(
  berth: Berth,
  sessionId: string,
  path: string,
  bytes: Buffer,
  append: boolean,
): Promise<void> {
  if (bytes.length > MAX_WRITE_BYTES)
    throw new BerthError(
      'INVALID_INPUT',
      `write_file takes at most ${MAX_WRITE_BYTES} bytes, got ${bytes.length}`,
      {
        hint: `Write a larger file in parts of ${MAX_WRITE_BYTES} bytes: the first without append, the rest with append: true.`,
      },
    );
  const r = await runCollected(berth, sessionId, {
    command: `mkdir -p "$(dirname "$BERTH_PATH")" && printf %s "$BERTH_DATA" | base64 -d ${append ? '>>' : '>'} "$BERTH_PATH"`,
    env: { BERTH_PATH: workspacePath(path, 'write_file'), BERTH_DATA: bytes.toString('base64') },
  });
  if (r.exitCode !== 0) throw failed(sessionId, path, 'write_file', r);
}
