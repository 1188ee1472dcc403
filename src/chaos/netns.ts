/**
 * What the chaos run's network namespaces share (worker-network.ts, cluster-network.ts):
 * `ip` with its error text, the run id that names a run's namespaces and links (the pid
 * of the chaos process in base 36, so the leftovers of a dead run can be told apart from
 * a live run's), waiting for a veth's carrier, and emptying a namespace of its processes
 * before it is deleted.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { sleep } from '../core/index.js';

const run = promisify(execFile);
export const NETNS_DIR = '/run/netns';
const GONE_WAIT_MS = 10_000;

/** This process's run id: what its namespaces' and links' names carry. */
export function ownRunId(): string {
  return process.pid.toString(36);
}

/** True when the run that named something with `runId` is no longer alive (and is not this one). */
export function isStaleRun(runId: string | undefined): boolean {
  if (runId === undefined) return false;
  const pid = Number.parseInt(runId, 36);
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** The namespaces `ip netns` knows. */
export async function listNamespaces(): Promise<string[]> {
  return (await ip(['netns', 'list']).catch(() => ''))
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter(Boolean);
}

/** SIGKILLs every process in the namespace and waits (bounded) until none is left; never throws. */
export async function killNamespaceProcesses(name: string): Promise<void> {
  const deadline = Date.now() + GONE_WAIT_MS;
  for (;;) {
    const pids = (await ip(['netns', 'pids', name]).catch(() => ''))
      .split('\n')
      .map(Number)
      .filter((pid) => Number.isInteger(pid) && pid > 0);
    if (pids.length === 0 || Date.now() > deadline) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * A veth reports its carrier a moment after both ends are up; a packet sent before is
 * dropped and TCP waits a second to send it again. Resolves once the link (in `namespace`,
 * default this one) carries, or after a few seconds, leaving the caller's own checks to tell.
 */
export async function carrierUp(link: string, namespace?: string): Promise<void> {
  const where = namespace ? ['-n', namespace] : [];
  for (let i = 0; i < 100; i++) {
    if (/\bLOWER_UP\b/.test(await ip([...where, '-o', 'link', 'show', 'dev', link]).catch(() => ''))) return;
    await sleep(50);
  }
}

export async function ip(args: string[]): Promise<string> {
  try {
    return (await run('ip', args)).stdout;
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? '').trim();
    throw new Error(`ip ${args.join(' ')} failed: ${stderr || (err as Error).message}`);
  }
}
