// Child processes of the base image build, and the text of any failure.
//
// Invariants:
// - Every child gets an argv array; nothing goes through a shell.
// - A failed `run` rejects with an Error naming the command, its exit code and the last ten
//   lines of its stderr, with the original error as `cause`.
import { type ChildProcess, execFile } from 'node:child_process';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export async function run(
  file: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv } = {},
): Promise<void> {
  try {
    await execFileAsync(file, args, { env: opts.env, maxBuffer: 64 * 2 ** 20 });
  } catch (err) {
    const e = err as { code?: unknown; stderr?: string };
    const stderr = (e.stderr ?? '').trim().split('\n').slice(-10).join('\n');
    throw new Error(`${file} ${args.join(' ')} failed (exit ${String(e.code)}): ${stderr}`, { cause: err });
  }
}

export function exitCode(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
