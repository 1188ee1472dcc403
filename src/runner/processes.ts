/**
 * Tool subprocesses: each runs in its own process group, its output captured up to a
 * limit; a job that writes more is killed at once (its whole group) and fails the turn
 * with OUTPUT_LIMIT_EXCEEDED, so an endless writer costs neither memory nor the turn's
 * time. Jobs are the OOM killer's first choice over the runner. At the end of a turn
 * every process in the sandbox but PID 1 (the init) and the runner is killed, so nothing
 * a turn started — not even a daemon that left its process group — survives into the
 * next one. Jobs run confined: no ptrace (job-confinement.ts).
 */
import { spawn } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { confinedShellArgs, PERL } from './job-confinement.js';
import { LimitExceeded } from './limits.js';

export interface ShellResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** True when the job ran past its timeout and its process group was killed. */
  timedOut: boolean;
}

/**
 * Tools see BERTH_RUNNER_PID and BERTH_ATTEMPT (the turn's try number), for fault
 * injection and idempotence. Rejects with LimitExceeded when the job's output passes
 * maxOutputBytes.
 */
export function runShell(
  command: string,
  opts: { cwd: string; maxOutputBytes: number; attempt: number; timeoutMs?: number },
): Promise<ShellResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(PERL, confinedShellArgs(command), {
      cwd: opts.cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, BERTH_RUNNER_PID: String(process.pid), BERTH_ATTEMPT: String(opts.attempt) },
    });
    // Inherited by everything the job forks: a memory bomb is killed, not the runner.
    if (child.pid) writeFile(`/proc/${child.pid}/oom_score_adj`, '1000').catch(() => undefined);
    let overflowed: string | null = null;
    const overflow = (stream: string) => () => {
      if (overflowed) return;
      overflowed = stream;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // the group is already gone
      }
    };
    const out = new Capture(opts.maxOutputBytes, overflow('stdout'));
    const err = new Capture(opts.maxOutputBytes, overflow('stderr'));
    child.stdout.on('data', (c: Buffer) => out.add(c));
    child.stderr.on('data', (c: Buffer) => err.add(c));
    child.on('error', (e) => err.add(Buffer.from(String(e))));
    let timedOut = false;
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            try {
              process.kill(-child.pid!, 'SIGKILL'); // the whole group: a pipeline's children too
            } catch {
              // already gone
            }
          }, opts.timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (overflowed) {
        reject(
          new LimitExceeded(
            'OUTPUT_LIMIT_EXCEEDED',
            `a job wrote more than ${opts.maxOutputBytes} bytes to ${overflowed} and was killed`,
          ),
        );
        return;
      }
      resolve({ exitCode: code, signal, stdout: out.text(), stderr: err.text(), timedOut });
    });
  });
}

class Capture {
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly limit: number,
    private readonly onOverflow: () => void,
  ) {}

  add(chunk: Buffer): void {
    const room = this.limit - this.size;
    if (chunk.length > room) {
      this.onOverflow();
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/**
 * SIGKILLs every process in this sandbox except PID 1 and the runner itself, pass after
 * pass until none is left (a process forked after a pass's listing is caught by the
 * next). Bounded: the pids limit caps what can be forked. Returns how many were killed.
 */
export async function killAllButRunner(): Promise<number> {
  let killed = 0;
  for (let pass = 0; pass < 100; pass++) {
    const others = (await readdir('/proc'))
      .map(Number)
      .filter((pid) => Number.isInteger(pid) && pid !== 1 && pid !== process.pid);
    const alive = others.filter((pid) => {
      try {
        process.kill(pid, 'SIGKILL');
        return true;
      } catch {
        return false; // already gone, or a zombie the init will reap
      }
    });
    killed += alive.length;
    if (alive.length === 0) return killed;
    await new Promise((r) => setTimeout(r, 5)); // let the kills land before looking again
    if (await onlyZombies(alive)) return killed;
  }
  return killed;
}

/** Killed processes linger as zombies until the init reaps them; they hold nothing. */
async function onlyZombies(pids: number[]): Promise<boolean> {
  for (const pid of pids) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    if (stat && !/\) Z /.test(stat)) return false;
  }
  return true;
}

/**
 * What every process in the sandbox holds (resident sandboxes report it with each
 * heartbeat): resident set and open descriptors. A process that exits while it is read
 * is skipped. The runner counts itself too: its leaks are the sandbox's.
 */
export async function sandboxUsage(): Promise<{ rssBytes: number; openFiles: number }> {
  let rssBytes = 0;
  let openFiles = 0;
  for (const pid of (await readdir('/proc')).filter((name) => /^\d+$/.test(name))) {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const rssKb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
    if (rssKb) rssBytes += Number(rssKb) * 1024;
    openFiles += (await readdir(`/proc/${pid}/fd`).catch(() => [])).length;
  }
  return { rssBytes, openFiles };
}
