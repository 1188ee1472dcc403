/**
 * The logs of a run's berth processes, read once after every one of them has exited, for
 * each check that reads them (the workers' self-fences, a failover's first failed call).
 *
 * Invariant: a process that was started has its log (it is opened before the spawn, and
 * lives outside any node's disk), so one that cannot be read, absent or not, fails the run
 * with its name and path: a check must never read a missing log as a log without findings.
 * A process never started has no log, and none is read.
 */
import { readFile } from 'node:fs/promises';

export async function readChildLogs(
  children: readonly { name: string; logFile: string; starts: number }[],
): Promise<string[]> {
  const logs: string[] = [];
  for (const c of children.filter((x) => x.starts > 0)) {
    try {
      logs.push(await readFile(c.logFile, 'utf8'));
    } catch (err) {
      throw new Error(
        `the log of ${c.name} (${c.logFile}), started ${c.starts} times, cannot be read: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }
  return logs;
}
