/**
 * The per-session workspace quota (agent `workspaceMb`), enforced on the host, where the
 * sandbox cannot lie: committed files + the turn's attempt layer, counted in allocated
 * blocks (a sparse file costs what it occupies). Checked every `intervalMs` while the turn
 * runs — a disk filler is stopped within one interval, bounding what it can take from the
 * host disk — and once more, authoritatively, before the layer is sealed: a turn over
 * the quota is never committed.
 *
 * Conservative by design: a committed file the turn modified is counted twice (its
 * committed copy and its copied-up one), and whiteouts do not give space back until the
 * layer is promoted. See docs/security.md for why a quota'd filesystem was not chosen.
 */
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { BerthError } from '../core/index.js';

/** Allocated bytes of a tree (the root included), not following symlinks; 0 when it does not exist. */
export async function treeDiskBytes(root: string): Promise<number> {
  const st = await lstat(root).catch(() => null);
  if (!st) return 0;
  let total = st.blocks * 512;
  if (!st.isDirectory()) return total;
  for (const name of await readdir(root).catch(() => [] as string[]))
    total += await treeDiskBytes(join(root, name));
  return total;
}

export class WorkspaceQuota {
  private timer: NodeJS.Timeout | null = null;
  private checking = false;

  private constructor(
    private readonly dirs: { upper: string; sessionId: string; turnId: string },
    private readonly committedBytes: number,
    readonly limitBytes: number,
  ) {}

  /** Measures the committed layer once (a turn cannot change it); null = none apart from `upper`. */
  static async measure(
    dirs: { committed: string | null; upper: string; sessionId: string; turnId: string },
    limitBytes: number,
  ): Promise<WorkspaceQuota> {
    return new WorkspaceQuota(dirs, dirs.committed ? await treeDiskBytes(dirs.committed) : 0, limitBytes);
  }

  /** Throws WORKSPACE_QUOTA_EXCEEDED when committed + the turn's layer are over the limit. */
  async check(): Promise<void> {
    const used = await this.usedBytes();
    if (used > this.limitBytes) {
      throw new BerthError(
        'WORKSPACE_QUOTA_EXCEEDED',
        `Session ${this.dirs.sessionId} workspace uses ${mib(used)} MiB, over its ${mib(this.limitBytes)} MiB quota (turn ${this.dirs.turnId})`,
      );
    }
  }

  /** What the workspace occupies now: committed + the turn's layer, in allocated bytes. */
  async usedBytes(): Promise<number> {
    return this.committedBytes + (await treeDiskBytes(this.dirs.upper));
  }

  /** Checks every intervalMs until stop(); calls onExceeded once with the error. */
  watch(intervalMs: number, onExceeded: (err: BerthError) => void): void {
    this.timer = setInterval(() => {
      if (this.checking) return;
      this.checking = true;
      this.check()
        .catch((err: unknown) => {
          if (err instanceof BerthError && err.code === 'WORKSPACE_QUOTA_EXCEEDED') {
            this.stop();
            onExceeded(err);
          }
        })
        .finally(() => {
          this.checking = false;
        });
    }, intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}
