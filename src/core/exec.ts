/**
 * A command run in a session's live sandbox (POST /v1/sessions/:id/exec): what a client
 * sends, and the lines it gets back. The API validates the request, the worker validates
 * it again (its control endpoint trusts nothing but the key and the fence), and every hop
 * streams the same NDJSON lines, one JSON object per line. A stream always ends with one
 * terminal line, `exit` or `error`; a hop that loses the hop before it writes the error.
 */
import { z } from 'zod';
import type { ErrorCode } from './errors.js';

/** How long a command may run when the request names no timeout. */
export const EXEC_DEFAULT_TIMEOUT_MS = 10 * 60_000;
export const EXEC_MAX_TIMEOUT_MS = 60 * 60_000;
const MAX_COMMAND_CHARS = 64 * 1024;
const MAX_ENV_VARS = 100;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The header the API sends the worker: which binding the operation is for, `<session>.<generation>`. */
export const FENCE_HEADER = 'x-berth-fence';

export const execRequestSchema = z
  .object({
    command: z
      .string()
      .min(1, 'command must not be empty (a shell command line, run with /bin/sh -c)')
      .max(MAX_COMMAND_CHARS),
    timeoutMs: z
      .number()
      .int()
      .min(1)
      .max(EXEC_MAX_TIMEOUT_MS, `timeoutMs is at most ${EXEC_MAX_TIMEOUT_MS} (an hour)`)
      .optional(),
    env: z
      .record(
        z.string().regex(ENV_NAME, 'env names are letters, digits and _ (not starting with a digit)'),
        z.string(),
      )
      .refine((env) => Object.keys(env).length <= MAX_ENV_VARS, `env holds at most ${MAX_ENV_VARS} variables`)
      .optional(),
    cwd: z
      .string()
      .regex(/^[^/]/, 'cwd is relative to the workspace (e.g. "src"), not an absolute path')
      .refine((cwd) => !cwd.split('/').includes('..'), 'cwd must stay inside the workspace: no ".." segments')
      .optional(),
  })
  .strict();

export type ExecRequest = z.output<typeof execRequestSchema>;

/** One line of an exec stream. */
export type ExecLine =
  | { type: 'stdout' | 'stderr'; data: string }
  | { type: 'exit'; exitCode: number | null; signal?: string; timedOut?: boolean }
  | { type: 'error'; code: ErrorCode; message: string; reason?: string };

export function isTerminalLine(line: ExecLine): boolean {
  return line.type === 'exit' || line.type === 'error';
}
