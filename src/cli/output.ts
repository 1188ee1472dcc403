/** How the CLI reports: errors as one line plus the fix, JSON when asked. */
import { BerthError, isBerthError } from '../core/index.js';

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** One line: what is wrong, then what to do. Exit code 2 for bad input, 1 otherwise. */
export function exitWithError(err: unknown): never {
  if (isBerthError(err)) {
    process.stderr.write(`berth: ${err.message}. Fix: ${err.hint}\n`);
    process.exit(err.status >= 400 && err.status < 500 ? 2 : 1);
  }
  const e = err instanceof Error ? err : new BerthError('INTERNAL', String(err));
  process.stderr.write(`berth: ${e.message}\n`);
  process.exit(1);
}
