/**
 * Tool subprocesses: each runs in its own process group, its output captured up to a
 * limit. At the end of a turn every process in the sandbox but PID 1 (the init) and the
 * runner is killed, so nothing a turn started — not even a daemon that left its process
 * group — survives into the next one.
 */
import { spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';

export interface ShellResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  truncated: boolean;
}

/** Tools see BERTH_RUNNER_PID and BERTH_ATTEMPT (the turn's try number), for fault injection and idempotence. */
export function runShell(
  command: string,
  opts: { cwd: string; maxOutputBytes: number; attempt: number },
): Promise<ShellResult> {
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', ['-c', command], {
      cwd: opts.cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, BERTH_RUNNER_PID: String(process.pid), BERTH_ATTEMPT: String(opts.attempt) },
    });
    const out = new Capture(opts.maxOutputBytes);
    const err = new Capture(opts.maxOutputBytes);
    child.stdout.on('data', (c: Buffer) => out.add(c));
    child.stderr.on('data', (c: Buffer) => err.add(c));
    child.on('error', (e) => err.add(Buffer.from(String(e))));
    child.on('close', (code, signal) =>
      resolve({
        exitCode: code,
        signal,
        stdout: out.text(),
        stderr: err.text(),
        truncated: out.truncated || err.truncated,
      }),
    );
  });
}

class Capture {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly limit: number) {}

  add(chunk: Buffer): void {
    const room = this.limit - this.size;
    if (room <= 0) {
      this.truncated = true;
      return;
    }
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (part.length < chunk.length) this.truncated = true;
    this.chunks.push(part);
    this.size += part.length;
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
