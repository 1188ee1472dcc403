/**
 * Reading history, against baselines from the same run: the diff of a turn that changed
 * 100 text files (a few lines each) of a workspace of 1,000 files, read from a file blob
 * store — the tree before the turn listed from the snapshot's index, the 100 old contents
 * read by ranged gets, the layer read whole, and each pair diffed — against the same diff
 * of the same objects packed without an index (as older versions wrote them: the snapshot
 * inflated and parsed whole), and against inflating and parsing both objects with nothing
 * kept (what any reader without an index pays at least). Then the same diff over a
 * workspace of 100 MiB, to show what the tree before the turn costs as it grows. And a
 * directory listed at a version: the first read builds the tree, the next ones find it kept.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { FileBlobStore } from '../src/blobs/index.js';
import type { ChainEntry, WorkspaceChain } from '../src/core/index.js';
import { withoutIndex } from '../src/workspace/archive-index.js';
import { packLayer, packTree, readLayerArchive } from '../src/workspace/layer-archive.js';
import type { PlanStep } from '../src/workspace/promotion.js';
import { WorkspaceHistory } from '../src/workspace/workspace-history.js';
import { type BenchOptions, stats } from './harness.js';

const CHANGED = 100;

export async function history({ quick }: BenchOptions) {
  const dir = await mkdtemp(join(tmpdir(), 'berth-bench-history-'));
  try {
    const small = await measure(dir, 'small', 1000, 4 * 1024, quick ? 10 : 40);
    const large = await measure(dir, 'large', 1000, 100 * 1024, quick ? 3 : 10);
    return { bench: 'history', changedFiles: CHANGED, small, large };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A text file of about `bytes`, in numbered lines; `edit` changes two of them. */
function text(i: number, bytes: number, edit = false): string {
  const lines: string[] = [];
  for (let n = 0; lines.length * 40 < bytes; n++)
    lines.push(
      edit && (n === 3 || n === 40) ? `edited line ${n} of file ${i}` : `line ${n} of file ${i} .........`,
    );
  return `${lines.join('\n')}\n`;
}

async function measure(root: string, name: string, files: number, bytes: number, rounds: number) {
  const blobs = new FileBlobStore(join(root, name, 'blobs'));
  const tree = join(root, name, 'tree');
  await mkdir(join(tree, 'src'), { recursive: true });
  for (let i = 0; i < files; i++) await writeFile(join(tree, 'src', `f${i}.txt`), text(i, bytes));
  const upper = join(root, name, 'upper');
  await mkdir(join(upper, 'src'), { recursive: true });
  const steps: PlanStep[] = [{ op: 'mkdir', path: 'src', mode: 0o755, uid: 0, gid: 0 }];
  for (let i = 0; i < CHANGED; i++) {
    const path = `src/f${i * (files / CHANGED)}.txt`;
    await writeFile(join(upper, path), text(i * (files / CHANGED), bytes, true));
    steps.push({ op: 'move', from: path, path });
  }
  const put = async (key: string, archive: AsyncIterable<Uint8Array>) => {
    const chunks: Buffer[] = [];
    for await (const c of archive) chunks.push(Buffer.from(c));
    const body = Buffer.concat(chunks);
    await blobs.put(key, [body], { maxBytes: 2 ** 31 });
    return body.length;
  };
  const entries: ChainEntry[] = [
    {
      version: 1,
      kind: 'snapshot',
      key: 'snapshots/s',
      size: await put('snapshots/s', packTree(tree)),
      turnId: null,
    },
    {
      version: 2,
      kind: 'layer',
      key: 'layers/l',
      size: await put('layers/l', packLayer({ version: 1, steps }, upper)),
      turnId: 't',
    },
  ];
  const chain: WorkspaceChain = { sessionId: 'bench', version: 2, entries };
  // The same objects as packed before indices: the diff a reader pays without them.
  const unindexed: ChainEntry[] = [];
  for (const e of entries) {
    const body = withoutIndex(await buffer((await blobs.get(e.key)).body));
    await blobs.put(`${e.key}-unindexed`, [body], { maxBytes: 2 ** 31 });
    unindexed.push({ ...e, key: `${e.key}-unindexed`, size: body.length });
  }
  const oldChain: WorkspaceChain = { ...chain, entries: unindexed };
  const reader = new WorkspaceHistory(blobs);
  const discard = { write: async () => {}, close: async () => {} };
  const floor = { apply: async () => {}, startFile: async () => discard };
  const diffMs: number[] = [];
  const unindexedMs: number[] = [];
  const baselineMs: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let t = performance.now();
    const diff = await reader.diff(chain, 2);
    diffMs.push(performance.now() - t);
    t = performance.now();
    const old = await new WorkspaceHistory(blobs).diff(oldChain, 2);
    unindexedMs.push(performance.now() - t);
    for (const d of [diff, old])
      if (d.counts.modified !== CHANGED)
        throw new Error(`expected ${CHANGED} modified files, got ${d.counts.modified}`);
    if (JSON.stringify(diff.files) !== JSON.stringify(old.files))
      throw new Error('the diff read through indices differs from the one read without');
    t = performance.now();
    for (const e of entries) await readLayerArchive((await blobs.get(e.key)).body, floor);
    baselineMs.push(performance.now() - t);
  }
  const firstList = performance.now();
  await reader.read(chain, 2, 'src');
  const listFirstMs = performance.now() - firstList;
  const listMs: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t = performance.now();
    await reader.read(chain, 2, 'src');
    listMs.push(performance.now() - t);
  }
  return {
    listFirstMs: Math.round(listFirstMs * 10) / 10,
    listKeptMs: stats(listMs),
    workspaceFiles: files,
    workspaceBytes: files * bytes,
    snapshotObjectBytes: entries[0]!.size,
    diffMs: stats(diffMs),
    unindexedDiffMs: stats(unindexedMs),
    baselineInflateMs: stats(baselineMs),
  };
}
