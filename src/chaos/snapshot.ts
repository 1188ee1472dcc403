/**
 * What the store says about a chaos run's sessions, read once after every berth process
 * has exited (so nothing changes under the checker and the report).
 *
 * Invariants:
 * - Read-only in effect: opening the store applies no migration a berth of this version
 *   has not already applied, and no transition is called.
 * - Message and event listings are paged and bounded (MAX_PAGES pages each per session).
 */
import { join } from 'node:path';
import type { FailedStep, Message, SessionEvent, SessionView, Turn, WorkspaceChain } from '../core/index.js';
import { openStore, type Store } from '../store/index.js';

export interface SessionSnapshot {
  id: string;
  view: SessionView | null;
  messages: Message[];
  turns: Turn[];
  state: Record<string, unknown>;
  /** Its session events, oldest first (a failed script step is reported in a progress event). */
  events: SessionEvent[];
  /** Its workspace chain: the newest snapshot and the layers after it. */
  chain: WorkspaceChain;
}

const NO_SESSION = { view: null, messages: [], turns: [], state: {}, events: [] };
const PAGE = 500;
const MAX_PAGES = 200;

/** The run's store, opened by the chaos process itself to read it (never to call a transition). */
export function openRunStore(
  dataDir: string,
  leaseMs: number,
  /** ResolvedConfig.store of the run: '' = SQLite in the data dir. */
  storeUrl: string,
): Promise<Store> {
  return openStore({
    store: storeUrl,
    sqlitePath: join(dataDir, 'berth.db'),
    leaseMs,
    // Unused: a reader calls no transition that applies a retry policy.
    retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 },
  });
}

export async function readStoreSnapshot(
  dataDir: string,
  sessionIds: string[],
  leaseMs: number,
  storeUrl: string,
): Promise<SessionSnapshot[]> {
  const store = await openRunStore(dataDir, leaseMs, storeUrl);
  try {
    const out: SessionSnapshot[] = [];
    for (const id of sessionIds) {
      const view = await store.getSessionView(id, store.clock.now());
      // A run interrupted while starting never created its sessions: nothing to read of them.
      if (!view) {
        out.push({ ...NO_SESSION, id, chain: { sessionId: id, version: 0, entries: [] } });
        continue;
      }
      out.push({
        id,
        view,
        messages: await paged((after) => store.listMessages(id, after, PAGE)),
        turns: await store.listTurns(id),
        state: await store.getState(id),
        events: await paged((after) => store.eventsAfter(id, after, PAGE)),
        chain: await store.getWorkspaceChain(id),
      });
    }
    return out;
  } finally {
    await store.close();
  }
}

/**
 * How many inbound messages the session's committed turns took: a turn may take several,
 * and each of them wrote its turn of the workload.
 */
export function committedMessageCount(s: SessionSnapshot): number {
  return s.turns.filter((t) => t.status === 'committed').reduce((n, t) => n + t.messageIds.length, 0);
}

/** The failed step each turn reported in a progress event, by turn id. */
export function reportedSteps(s: SessionSnapshot): Map<string, FailedStep> {
  const steps = new Map<string, FailedStep>();
  for (const e of s.events) {
    const step = e.type === 'progress' ? (e.data.failedStep as FailedStep | undefined) : undefined;
    if (step) steps.set(String(e.data.turnId), step);
  }
  return steps;
}

/** Every row of a listing by id, PAGE at a time, at most MAX_PAGES pages. */
async function paged<T extends { id: number }>(page: (afterId: number) => Promise<T[]>): Promise<T[]> {
  const rows: T[] = [];
  for (let n = 0, after = 0; n < MAX_PAGES; n++) {
    const batch = await page(after);
    rows.push(...batch);
    if (batch.length < PAGE) break;
    after = batch.at(-1)!.id;
  }
  return rows;
}
