/**
 * One run of a harness (Claude Code, Codex, opencode) as a job of the turn: started in
 * /workspace in its own process group, confined like every job (no ptrace), the OOM
 * killer's first choice over the runner; its stdout read as JSON lines, one event each;
 * the last lines of its stderr kept for the error. It is killed with its whole group past
 * its timeout, and the runner kills whatever is left at the end of the turn.
 *
 * A harness that exits non-zero, dies of a signal or cannot start fails the turn with
 * HARNESS_FAILED and its last stderr lines; one past its timeout with HARNESS_TIMEOUT.
 * Both are catalogue codes the gateway keeps, and the turn is retried like any other
 * failure. Node built-ins only; ships into the sandbox.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { HarnessCode } from '../core/protocol.js';
import { confinedArgs, PERL } from './job-confinement.js';

const STDERR_LINES = 20;
/** A single stdout line longer than this is not an event a harness sends: it is skipped. */
const MAX_EVENT_BYTES = 8 * 1024 * 1024;

export class HarnessError extends Error {
  constructor(
    readonly code: HarnessCode,
    message: string,
  ) {
    super(message);
  }
}

export interface HarnessRun {
  /** The harness's executable (absolute) and its arguments. */
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  timeoutMs: number;
  /**
   * What the harness reads on its standard input: the turn's prompt. Not an argument: one
   * argument may hold at most 128 KiB (the kernel's MAX_ARG_STRLEN), a message up to 256 KiB.
   */
  stdin: string;
  /** Each stdout line that parses as a JSON object. Awaited in order. */
  onEvent(event: Record<string, unknown>): Promise<void>;
}

/** Resolves when the harness exits 0; rejects with HarnessError otherwise. */
export function runHarness(name: string, run: HarnessRun): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(PERL, confinedArgs(run.argv), {
      cwd: run.cwd,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: run.env,
    });
    // A harness that exits before reading all of it closes the pipe: its exit code tells, not EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(run.stdin);
    if (child.pid) writeFile(`/proc/${child.pid}/oom_score_adj`, '1000').catch(() => undefined);
    const stderr: string[] = [];
    createInterface({ input: child.stderr }).on('line', (line) => {
      stderr.push(line.slice(0, 2000));
      if (stderr.length > STDERR_LINES) stderr.shift();
    });
    // Events are handled one after the other, in the order the harness wrote them.
    let events = Promise.resolve();
    let eventError: unknown = null;
    createInterface({ input: child.stdout, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) => {
      if (line.length > MAX_EVENT_BYTES || !line.startsWith('{')) return;
      let event: Record<string, unknown>;
      try {
        event = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return; // a harness's stray non-JSON output is not an event
      }
      events = events
        .then(() => run.onEvent(event))
        .catch((err: unknown) => {
          eventError ??= err;
        });
    });
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, run.timeoutMs);
    let spawnError: Error | null = null;
    child.on('error', (err) => {
      spawnError = err;
    });
    child.on('close', async (code, signal) => {
      clearTimeout(timer);
      // Its tools may still run in the group (a background job): they end with the harness.
      killGroup();
      await events;
      const tail = stderr.length ? `; last stderr lines:\n${stderr.join('\n')}` : '';
      if (timedOut)
        return reject(
          new HarnessError('HARNESS_TIMEOUT', `${name} ran past its timeout (${run.timeoutMs} ms)${tail}`),
        );
      if (spawnError)
        return reject(new HarnessError('HARNESS_FAILED', `${name} did not start: ${spawnError.message}`));
      if (code !== 0)
        return reject(
          new HarnessError(
            'HARNESS_FAILED',
            `${name} exited ${signal ? `on signal ${signal}` : `with code ${code}`}${tail}`,
          ),
        );
      if (eventError) return reject(eventError);
      resolve();
    });
  });
}
