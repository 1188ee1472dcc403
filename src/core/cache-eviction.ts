/**
 * Which workspace copies a worker's data dir gives up to stay under its byte budget
 * (`cacheBytes`): the least recently used first, and never a copy that is the only one
 * or in use — bound to a sandbox or running a turn (pinned by a live process), a resident
 * agent's workspace (written in place, it lives only here), or holding attempt layers not
 * yet settled. Pure: entries in, a decision out.
 */

/** One session's copy on the data dir, as a pass of the budget saw it. */
export interface CacheEntry {
  sessionId: string;
  /** Allocated bytes of the session's dir: its committed tree, attempt layers, scratch archives. */
  bytes: number;
  /** When a turn last used it (epoch ms). */
  lastUsedAt: number;
  /** A live process has it bound or runs a turn on it. */
  pinned: boolean;
  /** A resident agent's workspace: the only copy. */
  resident: boolean;
  /** Attempt layers still on disk (a turn in flight, or a promotion not yet settled). */
  hasLayers: boolean;
  /** A committed tree is here (false once evicted: its dir keeps only a few inodes). */
  held: boolean;
}

export type CacheDecision =
  | { action: 'keep'; totalBytes: number }
  | {
      action: 'evict';
      /** Oldest use first. */
      sessionIds: string[];
      totalBytes: number;
      freedBytes: number;
      /** True when evicting every evictable copy still leaves the data dir over the budget. */
      stillOver: boolean;
    };

/** What to evict so the copies fit in `budgetBytes` (0 = no budget). */
export function decideCacheEvictions(entries: readonly CacheEntry[], budgetBytes: number): CacheDecision {
  const totalBytes = entries.reduce((sum, e) => sum + e.bytes, 0);
  if (budgetBytes === 0 || totalBytes <= budgetBytes) return { action: 'keep', totalBytes };
  const evictable = entries
    .filter((e) => !e.pinned && !e.resident && !e.hasLayers && e.held)
    .sort((a, b) => a.lastUsedAt - b.lastUsedAt || a.sessionId.localeCompare(b.sessionId));
  const sessionIds: string[] = [];
  let freedBytes = 0;
  for (const e of evictable) {
    if (totalBytes - freedBytes <= budgetBytes) break;
    sessionIds.push(e.sessionId);
    freedBytes += e.bytes;
  }
  if (sessionIds.length === 0) return { action: 'keep', totalBytes };
  return {
    action: 'evict',
    sessionIds,
    totalBytes,
    freedBytes,
    stillOver: totalBytes - freedBytes > budgetBytes,
  };
}
