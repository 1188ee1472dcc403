/**
 * The sandbox limits a turn can hit, seen from inside: the kernel's own counters of the
 * sandbox's cgroup (forks refused at the pids limit, processes OOM-killed at the memory
 * limit) and the free space of the scratch tmpfs mounts (/tmp, /dev/shm). The runner reads them when a turn starts
 * and again when it ends; a counter that grew means this turn hit the limit, and the
 * turn fails for good with that catalogue code (a retry would hit it again). cgroup v1
 * and v2 layouts are both read; a runtime that shows no cgroup files (gVisor) leaves the
 * worker's own checks (OOM exit, heartbeat, turn timeout) as the safety net.
 */
import { readFile, statfs } from 'node:fs/promises';
import type { LimitCode } from '../core/protocol.js';

export class LimitExceeded extends Error {
  constructor(
    readonly code: LimitCode,
    message: string,
  ) {
    super(message);
  }
}

const SCRATCH_DIRS = ['/tmp', '/dev/shm'];
const CGROUP = '/sys/fs/cgroup';
const PIDS_EVENTS = [`${CGROUP}/pids.events`, `${CGROUP}/pids/pids.events`];
const PIDS_MAX = [`${CGROUP}/pids.max`, `${CGROUP}/pids/pids.max`];
const MEMORY_EVENTS = [`${CGROUP}/memory.events`, `${CGROUP}/memory/memory.oom_control`];
const MEMORY_MAX = [`${CGROUP}/memory.max`, `${CGROUP}/memory/memory.limit_in_bytes`];

interface Counters {
  /** Forks refused at the pids limit. */
  pidsRefused: number | null;
  /** Processes killed by the OOM killer at the memory limit. */
  oomKills: number | null;
}

export class LimitWatch {
  private constructor(private readonly atStart: Counters) {}

  static async start(): Promise<LimitWatch> {
    return new LimitWatch(await readCounters());
  }

  /** The first limit the turn hit since start(), or null. */
  async breach(): Promise<LimitExceeded | null> {
    const now = await readCounters();
    if (grew(this.atStart.oomKills, now.oomKills)) {
      const mib = Math.round(((await firstNumber(MEMORY_MAX, /^(\d+)/)) ?? 0) / 2 ** 20);
      return new LimitExceeded(
        'SANDBOX_OUT_OF_MEMORY',
        `a process of the turn was killed at the sandbox memory limit (${mib} MiB)`,
      );
    }
    if (grew(this.atStart.pidsRefused, now.pidsRefused)) {
      const max = await firstNumber(PIDS_MAX, /^(\d+)/);
      return new LimitExceeded(
        'SANDBOX_PIDS_LIMIT',
        `the turn's processes reached the sandbox process limit (${max ?? '?'}); further forks were refused`,
      );
    }
    for (const scratch of SCRATCH_DIRS) {
      const fs = await statfs(scratch).catch(() => null);
      if (fs && fs.blocks > 0 && fs.bavail === 0) {
        const mib = Math.round((fs.blocks * fs.bsize) / 2 ** 20);
        return new LimitExceeded('SANDBOX_TMP_FULL', `${scratch} (${mib} MiB) is full`);
      }
    }
    return null;
  }
}

async function readCounters(): Promise<Counters> {
  return {
    pidsRefused: await firstNumber(PIDS_EVENTS, /^max (\d+)$/m),
    oomKills: await firstNumber(MEMORY_EVENTS, /^oom_kill (\d+)$/m),
  };
}

function grew(before: number | null, after: number | null): boolean {
  return before !== null && after !== null && after > before;
}

/** The number `pattern` captures in the first of `paths` that exists and matches. */
async function firstNumber(paths: string[], pattern: RegExp): Promise<number | null> {
  for (const path of paths) {
    const text = await readFile(path, 'utf8').catch(() => null);
    const match = text === null ? null : pattern.exec(text);
    if (match) return Number(match[1]);
  }
  return null;
}
