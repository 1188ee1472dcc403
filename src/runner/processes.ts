/**
 * Tool subprocesses: each runs in its own process group, its output captured up to a
 * limit; a job that writes more is killed at once (its whole group) and fails the turn
 * with OUTPUT_LIMIT_EXCEEDED, so an endless writer costs neither memory nor the turn's
 * time. A job ends when its main process exits: a background process that inherited its
 * output (`npm run dev &`) would otherwise hold the job open until the turn timed out, so
 * the output is read for OUTPUT_GRACE_MS more and the job returns, naming the processes
 * it left running. They are not killed here: they live until the turn ends, like any
 * process the turn started (a resident agent keeps them), and their output goes on being
 * read and dropped, so a writer never blocks on a full pipe or dies of a closed one.
 * Jobs are the OOM killer's first choice over the runner. At the end of a turn every
 * process in the sandbox but PID 1 (the init) and the runner is killed, so nothing a
 * turn started — not even a daemon that left its process group — survives into the
 * next one. Jobs run confined: no ptrace (job-confinement.ts).
 */
import { spawn } from 'node:child_process';
import { readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { LeftProcess, LeftRunning } from '../core/protocol.js';
import { confinedShellArgs, OUTPUT_REPORT_FD, PERL } from './job-confinement.js';
import { LimitExceeded } from './limits.js';

/**
 * How long a job's output is still read once its main process exited while something else
 * holds it open: long enough for what the job wrote last to arrive, short enough to cost
 * nothing a person notices. A job whose output closes with its main process ends at once.
 */
export const OUTPUT_GRACE_MS = 300;

export interface ShellResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** True when the job ran past its timeout and its process group was killed. */
  timedOut: boolean;
  /**
   * What the job left running when it returned: every live process of its process group,
   * and any other that holds its output. Empty for a job that started nothing lasting.
   */
  leftRunning: LeftProcess[];
}

/**
 * Tools see BERTH_RUNNER_PID and BERTH_ATTEMPT (the turn's try number), for fault
 * injection and idempotence. Resolves when the job's main process has exited and its
 * output closed, or OUTPUT_GRACE_MS after the exit while a process it started holds the
 * output. Rejects with LimitExceeded when the job's output passes maxOutputBytes.
 */
export function runShell(
  command: string,
  opts: {
    cwd: string;
    maxOutputBytes: number;
    attempt: number;
    timeoutMs?: number;
    /** Set for the job on top of the runner's own environment. */
    env?: Record<string, string>;
    /** Hears each piece of output as it comes (within the limit), besides the capture. */
    onOutput?: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
    /** Aborted: the job's process group is killed (its client went away). */
    signal?: AbortSignal;
  },
): Promise<ShellResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(PERL, confinedShellArgs(command), {
      cwd: opts.cwd,
      detached: true,
      // stdout, stderr, and the wrapper's report of where they lead (OUTPUT_REPORT_FD).
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      env: {
        ...process.env,
        BERTH_RUNNER_PID: String(process.pid),
        BERTH_ATTEMPT: String(opts.attempt),
        ...opts.env,
      },
    });
    const stdio = child.stdio as unknown as (Readable | null)[];
    const report = stdio[OUTPUT_REPORT_FD];
    // Without the report (the wrapper failed before it wrote it), the job's group still names what it left.
    const outputLinks = report
      ? reportedLinks(report).catch(() => new Set<string>())
      : Promise.resolve(new Set<string>());
    // Inherited by everything the job forks: a memory bomb is killed, not the runner.
    if (child.pid) writeFile(`/proc/${child.pid}/oom_score_adj`, '1000').catch(() => undefined);
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL'); // the whole group: a pipeline's children too
      } catch {
        // the group is already gone
      }
    };
    let overflowed: string | null = null;
    const overflow = (stream: string) => () => {
      if (overflowed) return;
      overflowed = stream;
      killGroup();
    };
    const out = new Capture(opts.maxOutputBytes, overflow('stdout'));
    const err = new Capture(opts.maxOutputBytes, overflow('stderr'));
    stdio[1]?.on('data', (c: Buffer) => out.add(c) && opts.onOutput?.('stdout', c));
    stdio[2]?.on('data', (c: Buffer) => err.add(c) && opts.onOutput?.('stderr', c));
    opts.signal?.addEventListener('abort', killGroup, { once: true });
    child.on('error', (e) => err.add(Buffer.from(String(e))));
    let timedOut = false;
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            killGroup();
          }, opts.timeoutMs);
    let exit: { code: number | null; signal: string | null } | undefined;
    let grace: NodeJS.Timeout | undefined;
    let done = false;
    const finish = (outputClosed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(grace);
      opts.signal?.removeEventListener('abort', killGroup);
      // From here on, whatever still writes to the output is read and dropped.
      out.close();
      err.close();
      if (overflowed) {
        reject(
          new LimitExceeded(
            'OUTPUT_LIMIT_EXCEEDED',
            `a job wrote more than ${opts.maxOutputBytes} bytes to ${overflowed} and was killed`,
          ),
        );
        return;
      }
      const left = async () =>
        child.pid ? processesLeftBy(child.pid, outputClosed ? new Set() : await outputLinks) : [];
      left().then(
        (leftRunning) =>
          resolve({
            exitCode: exit?.code ?? null,
            signal: exit?.signal ?? null,
            stdout: out.text(),
            stderr: err.text(),
            timedOut,
            leftRunning,
          }),
        reject,
      );
    };
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      // The job is over; its time limit no longer applies to what it left behind.
      clearTimeout(timer);
      grace = setTimeout(() => finish(false), OUTPUT_GRACE_MS);
    });
    child.on('close', (code, signal) => {
      exit ??= { code, signal };
      finish(true);
    });
  });
}

/**
 * What a reply says of the processes a job left: they die with the turn, as every process
 * a turn started does, unless the sandbox is a resident agent's, which keeps them.
 * undefined when the job left none.
 */
export function leftRunningOf(left: LeftProcess[], resident: boolean): LeftRunning | undefined {
  if (left.length === 0) return undefined;
  return { processes: left, fate: resident ? 'kept-resident' : 'killed-at-turn-end' };
}

/** The wrapper's report: where the job's stdout and stderr lead; empty if it wrote none. */
async function reportedLinks(report: Readable): Promise<Set<string>> {
  let text = '';
  report.setEncoding('utf8');
  for await (const chunk of report) text += chunk;
  return new Set(text.split('\n').filter((line) => line !== ''));
}

/**
 * Live processes in process group `pgid`, plus those outside it holding one of
 * `outputLinks` (a job's child that left the group but kept the output). The runner and
 * PID 1 are never among them; zombies hold nothing and are left out.
 */
async function processesLeftBy(pgid: number, outputLinks: Set<string>): Promise<LeftProcess[]> {
  const left: LeftProcess[] = [];
  for (const pid of (await readdir('/proc')).map(Number)) {
    if (!Number.isInteger(pid) || pid === 1 || pid === process.pid) continue;
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    // pid (comm) state ppid pgrp …: comm may hold spaces and parentheses, so split after the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (!state || state === 'Z') continue;
    if (Number(pgrp) !== pgid && !(await holdsAny(pid, outputLinks))) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    left.push({ pid, command: (cmdline.split('\0').join(' ').trim() || comm).slice(0, COMMAND_CHARS) });
  }
  return left;
}

/** How much of a left process's command line the reply shows. */
const COMMAND_CHARS = 200;

async function holdsAny(pid: number, links: Set<string>): Promise<boolean> {
  if (links.size === 0) return false;
  for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [])) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    if (links.has(target)) return true;
  }
  return false;
}

class Capture {
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly limit: number,
    private readonly onOverflow: () => void,
  ) {}

  private closed = false;

  /** true when the chunk was captured (not past the limit, not after the close). */
  add(chunk: Buffer): boolean {
    if (this.closed) return false;
    const room = this.limit - this.size;
    if (chunk.length > room) {
      this.onOverflow();
      return false;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    return true;
  }

  /** Stops capturing: later chunks are dropped, and no longer count towards the limit. */
  close(): void {
    this.closed = true;
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
