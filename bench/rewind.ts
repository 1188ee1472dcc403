/**
 * Rewinding a workspace of 100 MiB (1,000 files of 100 KiB, random bytes) by 50 turns, file
 * blobs and SQLite, with every version kept (retention all) and a compaction snapshot at
 * version 33 as the worker would make one: the rewind itself (one store transaction), the
 * bytes it adds to the blob store (none: it names objects the chain holds), and what the next
 * turn then pays on the worker that held the newer copy (only the files that differ
 * between its version and the rewound one written in place, read by ranged gets through
 * the objects' indices), against baselines measured in the same run: materialising the
 * current version on a machine that has none of it, and the rewound version likewise (what
 * the worker paid before indices: its copy materialised whole). Rewound twice: to version 1 (one object
 * of 100 MiB, 50 turns back) and to version 40 (across the snapshot: it and 7 layers).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BlobStore, FileBlobStore } from '../src/blobs/index.js';
import { agentSpecSchema, type WorkspaceChain } from '../src/core/index.js';
import { SANDBOX_USER } from '../src/runtime/index.js';
import { openSqliteStore, type Store } from '../src/store/index.js';
import { Workspaces } from '../src/workspace/index.js';
import { packLayer, packTree } from '../src/workspace/layer-archive.js';
import type { PlanStep } from '../src/workspace/promotion.js';
import { type BenchOptions, round, stats } from './harness.js';

const FILES = 1000;
const FILE_BYTES = 100 * 1024;
const TURNS = 50;
const CHANGED_PER_TURN = 20;
const SNAPSHOT_AT = 33;
const SANDBOX_UID = Number(SANDBOX_USER.split(':')[0]);

export async function rewind({ quick }: BenchOptions) {
  const root = await mkdtemp(join(tmpdir(), 'berth-bench-rewind-'));
  const blobs = new FileBlobStore(join(root, 'blobs'));
  const store = openSqliteStore({
    path: ':memory:',
    leaseMs: 10_000,
    retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 3 },
  });
  try {
    const { contents } = await buildSession(root, blobs, store);
    const rounds = quick ? 1 : 3;
    const baselineMs: number[] = [];
    const results: Record<string, unknown>[] = [];
    for (let r = 0; r < rounds; r++) {
      // Baseline: the current version materialised on a machine with none of it.
      const fresh = new Workspaces(join(root, `fresh-${r}`), SANDBOX_UID, blobs);
      const t = performance.now();
      await fresh.ensureCurrent(await store.getWorkspaceChain('r'));
      baselineMs.push(performance.now() - t);
      await rm(join(root, `fresh-${r}`), { recursive: true });
    }
    // The worker that ran the 50 turns holds the current version.
    const worker = new Workspaces(join(root, 'worker'), SANDBOX_UID, blobs);
    await worker.ensureCurrent(await store.getWorkspaceChain('r'));
    for (const toVersion of [1, 40]) {
      const before = await blobBytes(blobs);
      let t = performance.now();
      const result = await store.rewindSession({ sessionId: 'r', toVersion, now: Date.now() });
      const rewindMs = performance.now() - t;
      const after = await blobBytes(blobs);
      const chain: WorkspaceChain = await store.getWorkspaceChain('r');
      // Baseline, first (a cold read is its to pay): the same version materialised whole, as
      // the worker did before indices (removing the copy it held is left out).
      const whole = new Workspaces(join(root, `whole-${toVersion}`), SANDBOX_UID, blobs);
      t = performance.now();
      await whole.ensureCurrent(chain);
      const materialiseMs = performance.now() - t;
      t = performance.now();
      const ensured = await worker.ensureCurrent(chain);
      const nextTurnMs = performance.now() - t;
      // Both copies hold the rewound tree: every file's bytes as version `toVersion` left them.
      const expected = contents[toVersion]!;
      for (const copy of [worker, whole])
        for (const [name, bytes] of expected)
          if (!(await readFile(join(copy.committedPath('r'), name))).equals(bytes))
            throw new Error(`${name} is not version ${toVersion}'s after the rewind`);
      await rm(join(root, `whole-${toVersion}`), { recursive: true });
      results.push({
        toVersion,
        fromVersion: result.version - 1,
        objectsNamed: result.objects,
        rewindMs: round(rewindMs),
        blobObjectsAdded: after.objects - before.objects,
        blobBytesAdded: after.bytes - before.bytes,
        nextTurnCatchUp: ensured.how,
        nextTurnCatchUpMs: round(nextTurnMs),
        catchUpBytes: ensured.bytes,
        materialiseWholeMs: round(materialiseMs),
      });
    }
    return {
      bench: 'rewind',
      workspaceBytes: FILES * FILE_BYTES,
      files: FILES,
      turns: TURNS + 1,
      baselineMaterialiseMs: stats(baselineMs),
      rewinds: results,
    };
  } finally {
    await store.close();
    await rm(root, { recursive: true, force: true });
  }
}

/** Session `r`: version 1 writes every file, each later turn rewrites 20 of them; returns each version's files. */
async function buildSession(root: string, blobs: BlobStore, store: Store) {
  const now = Date.now();
  await store.createAgent(
    agentSpecSchema.parse({ name: 'keep', provider: 'command', retention: { all: true } }),
    now,
  );
  await store.registerWorker({ id: 'w', host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
  const tree = join(root, 'tree');
  await mkdir(tree, { recursive: true });
  const files = new Map<string, Buffer>();
  for (let i = 0; i < FILES; i++) {
    const bytes = randomBytes(FILE_BYTES);
    files.set(`f${i}.bin`, bytes);
    await writeFile(join(tree, `f${i}.bin`), bytes);
  }
  const contents: Map<string, Buffer>[] = [new Map(), new Map(files)];
  await commit(store, blobs, 'layers/1', packTree(tree));
  for (let v = 2; v <= TURNS + 1; v++) {
    const upper = join(root, `upper-${v}`);
    await mkdir(upper);
    const steps: PlanStep[] = [];
    for (let c = 0; c < CHANGED_PER_TURN; c++) {
      const name = `f${(v * 37 + c * 53) % FILES}.bin`;
      const bytes = randomBytes(FILE_BYTES);
      files.set(name, bytes);
      await writeFile(join(upper, name), bytes);
      await writeFile(join(tree, name), bytes);
      steps.push({ op: 'move', from: name, path: name });
    }
    await commit(store, blobs, `layers/${v}`, packLayer({ version: 1, steps }, upper));
    await rm(upper, { recursive: true });
    contents.push(new Map(files));
    if (v === SNAPSHOT_AT) {
      const size = await put(blobs, `snapshots/${v}`, packTree(tree));
      await store.recordWorkspaceSnapshot(
        { sessionId: 'r', version: v, key: `snapshots/${v}`, size },
        Date.now(),
      );
    }
  }
  return { contents };
}

async function commit(store: Store, blobs: BlobStore, key: string, archive: AsyncIterable<Uint8Array>) {
  const size = await put(blobs, key, archive);
  const now = Date.now();
  await store.renewWorker('w', now);
  await store.enqueueMessage({ sessionId: 'r', agent: 'keep', text: key, now });
  const claim = (await store.claimRunnableSession('w', now))!;
  const fence = { sessionId: 'r', generation: claim.session.generation, workerId: 'w' };
  const started = await store.startTurn(fence, now);
  if (started.code !== 'ok' || !started.value) throw new Error('no turn');
  const baseVersion = (await store.getWorkspaceChain('r')).version;
  const code = await store.commitTurn(
    {
      ...fence,
      turnId: started.value.turn.id,
      outputs: [],
      workspace: { baseVersion, layer: { key, size } },
    },
    now,
  );
  if (code !== 'ok') throw new Error(`commit: ${code}`);
  await store.releaseSession(fence, now);
}

async function put(blobs: BlobStore, key: string, archive: AsyncIterable<Uint8Array>): Promise<number> {
  const chunks: Buffer[] = [];
  for await (const c of archive) chunks.push(Buffer.from(c));
  const body = Buffer.concat(chunks);
  await blobs.put(key, [body], { maxBytes: 2 ** 31 });
  return body.length;
}

async function blobBytes(blobs: BlobStore): Promise<{ objects: number; bytes: number }> {
  let objects = 0;
  let bytes = 0;
  let after: string | undefined;
  for (;;) {
    const page = await blobs.list('', after === undefined ? {} : { after });
    for (const o of page.objects) {
      objects++;
      bytes += o.size;
    }
    if (!page.next) return { objects, bytes };
    after = page.next;
  }
}
