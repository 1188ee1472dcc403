/**
 * What the store says about a chaos run's sessions, read once after every berth process
 * has exited (so nothing changes under the checker and the report).
 *
 * Invariants:
 * - Read-only in effect: opening the store applies no migration a berth of this version
 *   has not already applied, and no transition is called.
 * - Message listing is paged and bounded (MAX_PAGES pages per session).
 */
import { join } from 'node:path';
import type { Message, SessionView, Turn, WorkspaceChain } from '../core/index.js';
import { openStore } from '../store/index.js';

export interface SessionSnapshot {
  id: string;
  view: SessionView | null;
  messages: Message[];
  turns: Turn[];
  state: Record<string, unknown>;
  /** Its workspace chain: the newest snapshot and the layers after it. */
  chain: WorkspaceChain;
}

const PAGE = 500;
const MAX_PAGES = 200;

export async function readStoreSnapshot(
  dataDir: string,
  sessionIds: string[],
  leaseMs: number,
  /** ResolvedConfig.store of the run: '' = SQLite in the data dir. */
  storeUrl: string,
): Promise<SessionSnapshot[]> {
  const store = await openStore({
    store: storeUrl,
    sqlitePath: join(dataDir, 'berth.db'),
    leaseMs,
    // Unused: the snapshot calls no transition that applies a retry policy.
    retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 },
  });
  try {
    const out: SessionSnapshot[] = [];
    for (const id of sessionIds) {
      const messages: Message[] = [];
      for (let page = 0, after = 0; page < MAX_PAGES; page++) {
        const batch = await store.listMessages(id, after, PAGE);
        messages.push(...batch);
        if (batch.length < PAGE) break;
        after = batch.at(-1)!.id;
      }
      out.push({
        id,
        view: await store.getSessionView(id, store.clock.now()),
        messages,
        turns: await store.listTurns(id),
        state: await store.getState(id),
        chain: await store.getWorkspaceChain(id),
      });
    }
    return out;
  } finally {
    await store.close();
  }
}
