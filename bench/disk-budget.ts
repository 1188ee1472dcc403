/**
 * Bounded disks: one worker's data dir with a byte budget serving many sessions, driven at
 * the workspace layer (the copies, the chains in a `file` blob store, the budget's passes),
 * not through sandboxes. Each session's copy is made (2 MiB of random files, snapshotted
 * into its chain), then every session runs again in shuffled order, twice in a row: the
 * first run finds its copy evicted (a miss: materialised from the chain), the second finds
 * it (a hit: the baseline, same run). Every run checks every file of the copy against its
 * hash. Prints the peak bytes of the copies against the budget, before a pass (one copy in
 * use may sit above it until its release) and after it, and of the whole workspaces dir.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { FileBlobStore } from '../src/blobs/index.js';
import type { WorkspaceChain } from '../src/core/index.js';
import { SANDBOX_USER } from '../src/runtime/index.js';
import { WorkspaceBudget } from '../src/worker/index.js';
import { treeDiskBytes, Workspaces } from '../src/workspace/index.js';
import { type BenchOptions, round, stats } from './harness.js';

const MiB = 1024 * 1024;
const SANDBOX_UID = Number(SANDBOX_USER.split(':')[0]);
/** A session's copy: this many files making up 2 MiB. */
const FILES = 4;

export async function diskBudget({ quick }: BenchOptions) {
  const sessions = quick ? 50 : 500;
  const budgetBytes = (quick ? 20 : 200) * MiB;
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-bench-disk-'));
  try {
    const workspaces = new Workspaces(dataDir, SANDBOX_UID, new FileBlobStore(join(dataDir, 'blobs')));
    const chains = new Map<string, WorkspaceChain>();
    const store = { getWorkspaceChain: async (id: string) => chains.get(id)! };
    const budget = new WorkspaceBudget(workspaces, store, budgetBytes, pino({ level: 'silent' }));
    const hashes = new Map<string, string[]>();
    const peak = { beforePass: 0, afterPass: 0, wholeDirAfterPass: 0 };
    let turns = 0;
    const measure = async () => (await workspaces.listCopies()).reduce((sum, c) => sum + c.bytes, 0);
    const turn = async (id: string, work: () => Promise<void>) => {
      await budget.use(id);
      await work();
      peak.beforePass = Math.max(peak.beforePass, await measure());
      await budget.release(id);
      await budget.settled();
      peak.afterPass = Math.max(peak.afterPass, await measure());
      // Every block under workspaces/ (dirs and the protocol's files too), every 10th turn.
      if (turns++ % 10 === 0)
        peak.wholeDirAfterPass = Math.max(
          peak.wholeDirAfterPass,
          await treeDiskBytes(join(dataDir, 'workspaces')),
        );
    };
    const made = performance.now();
    for (let i = 0; i < sessions; i++) {
      const id = `s${i}`;
      await turn(id, async () => {
        const tree = workspaces.committedPath(id);
        await mkdir(tree, { recursive: true });
        const sums: string[] = [];
        for (let f = 0; f < FILES; f++) {
          const bytes = randomBytes((2 * MiB) / FILES);
          sums.push(createHash('sha256').update(bytes).digest('hex'));
          await writeFile(join(tree, `f${f}.bin`), bytes);
        }
        hashes.set(id, sums);
        await workspaces.ensureCurrent({ sessionId: id, version: 1, entries: [] }); // adopted
        const snapshot = (await workspaces.uploadSnapshot(id))!;
        chains.set(id, {
          sessionId: id,
          version: 1,
          entries: [{ ...snapshot, kind: 'snapshot', turnId: null }],
        });
      });
    }
    const makeMs = performance.now() - made;
    const missMs: number[] = [];
    const hitMs: number[] = [];
    let intact = 0;
    const order = [...chains.keys()].sort(() => Math.random() - 0.5);
    for (const id of order) {
      for (const samples of [missMs, hitMs]) {
        await turn(id, async () => {
          const t0 = performance.now();
          const ensured = await workspaces.ensureCurrent(chains.get(id)!);
          const ms = performance.now() - t0;
          budget.recordEnsured(ensured.how);
          (ensured.how === 'materialised' ? missMs : hitMs).push(ms);
          if (samples === hitMs && ensured.how !== 'current')
            throw new Error(`${id}: copy gone between two runs`);
          const tree = workspaces.committedPath(id);
          const sums = hashes.get(id)!;
          for (let f = 0; f < FILES; f++) {
            const got = createHash('sha256')
              .update(await readFile(join(tree, `f${f}.bin`)))
              .digest('hex');
            if (got !== sums[f]) throw new Error(`${id}: f${f}.bin differs from what was written`);
          }
          if (samples === hitMs) intact++;
        });
      }
    }
    const { hits, misses, evictions } = budget.stats();
    await budget.stop();
    return {
      bench: 'disk-budget',
      sessions,
      sessionBytes: 2 * MiB,
      budgetBytes,
      peakBytes: peak,
      underBudget: peak.afterPass <= budgetBytes,
      intactSessions: intact,
      makeSessionsS: round(makeMs / 1000),
      missMs: stats(missMs),
      hitMs: stats(hitMs),
      missOverHitP50: round(stats(missMs).p50 / Math.max(0.1, stats(hitMs).p50)),
      counts: { hits, misses, evictions },
    };
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}
