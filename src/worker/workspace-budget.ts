/**
 * Keeps the workspace copies on this worker's data dir under its byte budget (`cacheBytes`):
 * observe (every session dir, measured) → decideCacheEvictions → evict, one pass at a time,
 * after every session this worker releases and on a timer (copies other processes on the
 * data dir released). A copy is evicted only when the store's chain can rebuild it: a
 * session whose chain is empty past version 0 (a data dir from before chains, not yet
 * snapshotted) holds its only copy here. Counts what turns found (hits: the copy was here;
 * misses: materialised from the chain) for the metrics.
 */
import { statfs } from 'node:fs/promises';
import type { Logger } from 'pino';
import { decideCacheEvictions, isBerthError, sleep } from '../core/index.js';
import type { WorkerStore } from '../store/index.js';
import type { EnsuredWorkspace, Workspaces } from '../workspace/index.js';

/** How often copies released by other processes on the data dir are looked at. */
const PASS_EVERY_MS = 30_000;
/**
 * Releases asked for while a pass ran are served by one more pass, this long after: a pass
 * reads every session dir, so a busy worker's releases must not keep one running back to back.
 */
const PASS_GAP_MS = 1000;

export interface WorkspaceCacheStats {
  budgetBytes: number;
  /** What the last pass measured, after its evictions. */
  bytes: number;
  hits: number;
  misses: number;
  evictions: number;
}

/** The budget a worker enforces: the configured one, else half of the data dir's file system. */
export async function resolveCacheBudget(cacheBytes: number | 'auto', dataDir: string): Promise<number> {
  if (cacheBytes !== 'auto') return cacheBytes;
  const fs = await statfs(dataDir);
  return Math.floor((fs.blocks * fs.bsize) / 2);
}

export class WorkspaceBudget {
  private readonly counts = { bytes: 0, hits: 0, misses: 0, evictions: 0 };
  private passing: Promise<void> | null = null;
  private again = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly workspaces: Workspaces,
    private readonly store: Pick<WorkerStore, 'getWorkspaceChain'>,
    readonly budgetBytes: number,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.requestPass(), PASS_EVERY_MS);
    this.timer.unref();
    this.requestPass();
  }

  /** Resolves once no pass runs (none was asked for, or the ones asked for ended). */
  async settled(): Promise<void> {
    await this.passing;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.passing;
  }

  stats(): WorkspaceCacheStats {
    return { budgetBytes: this.budgetBytes, ...this.counts };
  }

  /** What bringing a turn's copy level took: it was here (a hit), or was materialised (a miss). */
  recordEnsured(how: EnsuredWorkspace['how']): void {
    if (how === 'materialised') this.counts.misses++;
    else this.counts.hits++;
  }

  /** The session's copy is in use by this process until release(); a pass follows the release. */
  async use(sessionId: string): Promise<void> {
    await this.workspaces.pinCopy(sessionId);
  }

  async release(sessionId: string): Promise<void> {
    await this.workspaces.unpinCopy(sessionId);
    this.requestPass();
  }

  /** Runs a pass now, or once more PASS_GAP_MS after the one under way. */
  private requestPass(): void {
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = (async () => {
      for (;;) {
        this.again = false;
        await this.pass().catch((err: unknown) => this.log.warn({ err }, 'Workspace cache pass failed'));
        if (!this.again) return;
        await sleep(PASS_GAP_MS);
      }
    })().finally(() => {
      this.passing = null;
    });
  }

  private async pass(): Promise<void> {
    const copies = await this.workspaces.listCopies();
    const decision = decideCacheEvictions(copies, this.budgetBytes);
    this.counts.bytes = decision.totalBytes;
    if (decision.action === 'keep') return;
    const bytesOf = new Map(copies.map((c) => [c.sessionId, c.bytes]));
    let freed = 0;
    for (const sessionId of decision.sessionIds) {
      if (!(await this.rebuildable(sessionId))) continue;
      const outcome = await this.workspaces.evictCopy(sessionId);
      if (outcome !== 'evicted') continue;
      this.counts.evictions++;
      freed += bytesOf.get(sessionId) ?? 0;
    }
    this.counts.bytes = decision.totalBytes - freed;
    this.log.info(
      { budgetBytes: this.budgetBytes, bytes: this.counts.bytes, freed, stillOver: decision.stillOver },
      'Workspace copies evicted to stay under the cache budget',
    );
  }

  /** The chain can bring the copy back (a session deleted from the store needs nothing back). */
  private async rebuildable(sessionId: string): Promise<boolean> {
    try {
      const chain = await this.store.getWorkspaceChain(sessionId);
      return chain.entries.length > 0 || chain.version === 0;
    } catch (err) {
      if (isBerthError(err, 'SESSION_NOT_FOUND')) return true;
      throw err;
    }
  }
}
