/**
 * The berth processes a chaos run starts: `berth up --slots 0` (the API) and `berth worker`s,
 * as real child processes of `node bin/berth.js`, each with its stderr appended to a log
 * file in the data dir.
 *
 * Invariants:
 * - A BerthProcess has at most one live incarnation; `restart` starts a new one with the
 *   same argv and env only after the previous one has exited.
 * - `stop` always ends with the process gone: SIGTERM, then SIGKILL after `graceMs`.
 * - Every wait is bounded in time.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, writeSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { sleep, type WorkerRow } from '../core/index.js';

/** bin/berth.js, from dist/src/chaos/ (compiled) — the same CLI a user runs. */
export const BERTH_BIN = fileURLToPath(new URL('../../../bin/berth.js', import.meta.url));

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class BerthProcess {
  private child: ChildProcess | null = null;
  private exit: Promise<ExitStatus> | null = null;
  /** Incarnations started so far (1 after start, 2 after one restart). */
  starts = 0;
  /** How and when the latest incarnation that ended ended (null while none has). */
  lastExit: (ExitStatus & { at: number }) | null = null;

  constructor(
    /** 'api', 'worker-1', ...: names the log file and the reports. */
    readonly name: string,
    readonly args: string[],
    private readonly env: NodeJS.ProcessEnv,
    readonly logFile: string,
    /**
     * Where it runs: inside a network namespace (`nsenter --net`) and a node's cgroup (a
     * shell that joins it); both exec, so the pid is berth's.
     */
    private readonly placement: { netnsPath?: string; cgroup?: { joinArgv(): string[] } } = {},
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    if (this.running) throw new Error(`${this.name} is already running (pid ${this.pid})`);
    const log = openSync(this.logFile, 'a');
    writeSync(
      log,
      `--- ${new Date().toISOString()} chaos: starting ${this.name}: berth ${this.args.join(' ')}\n`,
    );
    const argv = [process.execPath, BERTH_BIN, ...this.args];
    const { netnsPath, cgroup } = this.placement;
    if (netnsPath) argv.unshift('nsenter', `--net=${netnsPath}`, '--');
    if (cgroup) argv.unshift(...cgroup.joinArgv());
    const child = spawn(argv[0]!, argv.slice(1), {
      env: this.env,
      stdio: ['ignore', log, log],
    });
    closeSync(log);
    this.child = child;
    this.starts++;
    this.exit = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null)
        resolve({ code: child.exitCode, signal: child.signalCode });
      else
        child.once('exit', (code, signal) => {
          this.lastExit = { code, signal, at: Date.now() };
          resolve({ code, signal });
        });
    });
  }

  /** Resolves when the current incarnation has exited, or null after `timeoutMs`. */
  async waitForExit(timeoutMs: number): Promise<ExitStatus | null> {
    if (!this.exit) return { code: null, signal: null };
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), timeoutMs);
    });
    try {
      return await Promise.race([this.exit, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILL, the way a crash or the OOM killer ends a process; resolves once it is gone. */
  async sigkill(): Promise<void> {
    if (!this.running) return;
    this.child!.kill('SIGKILL');
    await this.waitForExit(10_000);
  }

  async restart(): Promise<void> {
    if (this.running) await this.sigkill();
    this.start();
  }

  /** Clean stop (SIGTERM), forced (SIGKILL) after graceMs. Returns how it ended and whether it was forced. */
  async stop(graceMs: number): Promise<ExitStatus & { forced: boolean }> {
    if (!this.child) return { code: null, signal: null, forced: false };
    if (!this.running) return { ...(await this.waitForExit(0))!, forced: false };
    this.child.kill('SIGTERM');
    const status = await this.waitForExit(graceMs);
    if (status) return { ...status, forced: false };
    this.child.kill('SIGKILL');
    return { ...((await this.waitForExit(10_000)) ?? { code: null, signal: 'SIGKILL' }), forced: true };
  }

  /** The last `maxChars` of the log, for error messages. */
  async logTail(maxChars = 2000): Promise<string> {
    const text = await readFile(this.logFile, 'utf8').catch(() => '');
    return text.slice(-maxChars);
  }
}

/** A TCP port nobody listens on right now (the OS picks it). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Polls GET /healthz every 100 ms; fails with the child's log when it exits or `timeoutMs` passes. */
export async function waitForHealthy(url: string, child: BerthProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!child.running) {
      throw new Error(`berth ${child.name} exited before it was healthy. Its log:\n${await child.logTail()}`);
    }
    const ok = await fetch(new URL('/healthz', url), { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await sleep(100);
  }
  throw new Error(
    `berth ${child.name} did not answer ${url}/healthz within ${timeoutMs} ms. Its log:\n${await child.logTail()}`,
  );
}

/**
 * The berth worker id of a child, from the store's worker rows (the one with its pid), polled
 * until it registers. Not from the API's /v1/status: behind hundreds of sessions' event
 * streams that answered after 40-60 s, and a node restarted mid-run was given up on.
 */
export async function workerIdOf(
  workers: () => Promise<Pick<WorkerRow, 'id' | 'pid'>[]>,
  child: BerthProcess,
  timeoutMs: number,
): Promise<string> {
  const pid = child.pid;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!child.running || child.pid !== pid)
      throw new Error(`berth ${child.name} exited during start-up. Its log:\n${await child.logTail()}`);
    const row = (await workers().catch(() => [])).find((w) => w.pid === pid);
    if (row) return row.id;
    await sleep(100);
  }
  throw new Error(
    `berth ${child.name} (pid ${pid}) did not register as a worker within ${timeoutMs} ms. Its log:\n${await child.logTail()}`,
  );
}
