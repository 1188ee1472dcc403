/** Running `berth` as real child processes, the way a user runs it, for multi-process tests. */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BERTH_BIN as BIN, freePort } from '../../src/chaos/index.js';

export { freePort };

export function berth(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** Spawns a long-running `berth` command with its stderr in `<dataDir>/<logName>`. */
export function spawnBerth(
  args: string[],
  env: NodeJS.ProcessEnv,
  dataDir: string,
  logName: string,
): ChildProcess {
  const log = openSync(join(dataDir, logName), 'a');
  return spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'ignore', log] });
}

export async function waitForHealthy(url: string, child: ChildProcess, logFile: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`berth exited ${child.exitCode}: ${await readFile(logFile, 'utf8')}`);
    if (
      await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('berth did not become healthy in 60 s');
}

/** Polls `check` every 100 ms until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The exit code (null when a signal ended it); resolves at once for a child already gone. */
export function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((r) => child.on('exit', (code) => r(code)));
}

/** A data dir as a dead machine leaves it, removed: every mount under it first (slots, overlays). */
export async function wipeDataDir(dir: string): Promise<void> {
  await promisify(execFile)('umount', ['-R', '-l', join(dir, 'slots')]).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}
