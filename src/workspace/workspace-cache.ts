/**
 * A machine's copy of a session's committed workspace is a cache of its chain in the blob
 * store (DESIGN "Across machines"): `committed/` plus a stamp naming the version it holds.
 *
 *   <data>/workspaces/<session>/committed/         the committed tree, at the stamp's version
 *   <data>/workspaces/<session>/committed.stamp    {version, layerVersion, layerKey}
 *   <data>/workspaces/<session>/layers/<turn>/layer.tgz
 *                                                  the sealed layer, as uploaded, when too
 *                                                  large to pack in memory
 *
 * Commit order: seal (promotion.ts) → uploadLayer (the object is durable) → the fenced
 * store commit appends its key → promotion, after which stampPromoted advances the stamp
 * (a promotion a crash made the next owner finish leaves the stamp behind: the next
 * ensureCurrent applies that layer again, which changes nothing). Before every turn,
 * ensureCurrent compares the stamp with the chain: equal, nothing to do; behind with every
 * later layer in the chain, those layers are applied in place; at another version of the
 * same chain (a rewind), only the entries that differ are written in place, read through
 * the objects' indices (the stamp removed first); otherwise (absent, ahead, from another
 * history, compacted past it, objects without an index) the tree is materialised afresh
 * from the newest snapshot and the layers after it, in a staging dir swapped in whole.
 *
 * Invariants: the stamp is written only after the tree it names is complete and flushed
 * (promotion and materialising flush it), so a crash can leave the stamp behind its tree
 * but never ahead: the stamp itself is not fsynced, and one lost or left unreadable by a
 * crash is caught up (layers applied again change nothing) or read as absent. A turn never
 * mounts a tree whose stamp does not equal the chain's version.
 */

import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { chown, mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { finished } from 'node:stream/promises';
import { promisify } from 'node:util';
import type { BlobStore } from '../blobs/index.js';
import type { WorkspaceChain, WorkspaceObjectRef } from '../core/index.js';
import { fsyncPath, stagingPath, writeFileAtomic } from '../durable-files/index.js';
import { type IndexedEntry, readIndexedBytes, readIndexedContent } from './archive-index.js';
import { applyEntries, applyLayerArchive, packLayer, packLayerInMemory, packTree } from './layer-archive.js';
import type { WorkspaceLayout } from './layout.js';
import { PLAN_FILE, type PromotionPlan } from './promotion.js';
import { type IndexedItem, WorkspaceHistory } from './workspace-history.js';

const run = promisify(execFile);
const STAMP_FILE = 'committed.stamp';
const LAYER_ARCHIVE = 'layer.tgz';
/** An archive up to this size is packed in memory: one part of an S3 upload. */
const IN_MEMORY_BYTES = 8 * 1024 * 1024;
/** Layer and snapshot objects are as large as a workspace may be; the quota bounds them. */
const MAX_OBJECT_BYTES = Number.MAX_SAFE_INTEGER;
/** Files' contents held at once while a copy is brought to another version in place. */
const BATCH_BYTES = 16 * 1024 * 1024;
/** A larger file is streamed from its object as it is written, not held. */
const STREAMED_BYTES = 8 * 1024 * 1024;

/** What a machine's copy holds: its version, and the newest layer it applied (to tell histories apart). */
export interface CacheStamp {
  version: number;
  layerVersion: number;
  layerKey: string | null;
}

/** An archive packed and hashed, ready to put: its bytes in memory or read from a local file. */
export interface PackedObject {
  sha256: string;
  size: number;
  body: Iterable<Uint8Array> | AsyncIterable<Uint8Array>;
}

/** Where a session's workspace objects live in the blob store. */
export const WORKSPACE_OBJECT_PREFIXES = ['layers/', 'snapshots/'] as const;
/** Where the checkpoints of running turns live in the blob store (named by turn_checkpoints rows). */
export const CHECKPOINT_OBJECT_PREFIX = 'checkpoints/';

export interface EnsuredWorkspace {
  version: number;
  /**
   * What it took: nothing, layers applied in place, only the entries that differ written in
   * place (another version of the same chain: a rewind), or the whole chain fetched.
   */
  how: 'current' | 'layers' | 'changed' | 'materialised' | 'adopted';
  objects: number;
  bytes: number;
}

export class WorkspaceCache {
  /** Lists versions' trees from the objects' indices (writeChanged). */
  private readonly history: WorkspaceHistory;

  constructor(
    private readonly layout: WorkspaceLayout,
    private readonly blobs: BlobStore,
    /** Owner of the committed tree's root (the sandbox's non-root user). */
    private readonly sandboxUid: number,
  ) {
    this.history = new WorkspaceHistory(blobs);
  }

  private sessionDir(sessionId: string): string {
    return this.layout.sessionDir(sessionId);
  }

  private committedPath(sessionId: string): string {
    return this.layout.committedPath(sessionId);
  }

  /** The stamp; null when there is none, or a crash left it unreadable (the tree is then fetched afresh). */
  async readStamp(sessionId: string): Promise<CacheStamp | null> {
    const text = await readFile(join(this.sessionDir(sessionId), STAMP_FILE), 'utf8').catch(() => null);
    try {
      return text === null ? null : (JSON.parse(text) as CacheStamp);
    } catch {
      return null;
    }
  }

  private async writeStamp(sessionId: string, stamp: CacheStamp): Promise<void> {
    await writeFileAtomic(join(this.sessionDir(sessionId), STAMP_FILE), JSON.stringify(stamp), {
      durable: false,
    });
  }

  /** Makes committed/ hold the chain's version; returns that version and what it took. */
  async ensureCurrent(chain: WorkspaceChain): Promise<EnsuredWorkspace> {
    const { sessionId } = chain;
    const stamp = await this.readStamp(sessionId);
    if (stamp && sameHistory(stamp, chain) && stamp.version === chain.version)
      return { version: chain.version, how: 'current', objects: 0, bytes: 0 };
    // A data dir from before chains: its tree is the only copy; it is kept, and snapshotted by the caller.
    if (
      !stamp &&
      chain.entries.length === 0 &&
      chain.version > 0 &&
      (await nonEmpty(this.committedPath(sessionId)))
    ) {
      await this.writeStamp(sessionId, { version: chain.version, layerVersion: 0, layerKey: null });
      return { version: chain.version, how: 'adopted', objects: 0, bytes: 0 };
    }
    const base = chain.entries[0]?.kind === 'snapshot' ? chain.entries[0].version : 0;
    if (stamp && sameHistory(stamp, chain) && stamp.version < chain.version && stamp.version >= base) {
      const later = chain.entries.filter((e) => e.kind === 'layer' && e.version > stamp.version);
      const committed = this.committedPath(sessionId);
      for (const entry of later) await this.applyObject(entry.key, committed);
      if (later.length > 0) await flush(committed);
      await this.writeStamp(sessionId, stampOf(chain));
      return { version: chain.version, how: 'layers', objects: later.length, bytes: sizeOf(later) };
    }
    const changed = stamp ? await this.writeChanged(chain, stamp) : null;
    if (changed) return { version: chain.version, how: 'changed', ...changed };
    await this.materialise(chain);
    return {
      version: chain.version,
      how: 'materialised',
      objects: chain.entries.length,
      bytes: sizeOf(chain.entries),
    };
  }

  /**
   * A copy of another version of the same chain (a rewind went back past it, or it is
   * behind a rewind) brought to the chain's version by writing in place only the entries
   * that differ between the two trees, listed from the objects' indices, their contents read
   * by ranged gets: what the copy holds already is neither fetched nor copied. Null when an
   * object of either version has no index, or the stamp's version is not retained: the
   * caller materialises. The stamp goes first, so a crash half way leaves none, and the next
   * call fetches the tree afresh.
   */
  private async writeChanged(
    chain: WorkspaceChain,
    stamp: CacheStamp,
  ): Promise<{ objects: number; bytes: number } | null> {
    const rows = chain.history ?? chain.entries;
    if (!rows.some((e) => e.version === stamp.layerVersion && e.key === stamp.layerKey)) return null;
    const [from, to] = await Promise.all([
      this.history.indexedTree(chain, stamp.version),
      this.history.indexedTree(chain, chain.version),
    ]);
    // A layer after the stamp's version may be applied in part (a promotion a crash cut
    // short leaves the stamp behind its tree): what it touches is rewritten from the target.
    const later = await this.history.entriesOf(
      rows.filter((e) => e.kind === 'layer' && e.version > stamp.version),
    );
    if (!from || !to || !later) return null;
    const unsure = touchedBy(later);
    const gone = new Set([...from.keys(), ...later.map((e) => e.p)].filter((p) => !to.has(p)));
    const deletes = [...gone].filter((p) => !gone.has(dirname(p)));
    const changed = [...to.values()].filter((item) => {
      const held = from.get(item.entry.p);
      return !held || identityOf(held.entry) !== identityOf(item.entry) || unsure(item.entry.p);
    });
    const read = { objects: new Set<string>(), bytes: 0 };
    const blobs = this.blobs;
    async function* entries() {
      for (const p of deletes) yield { entry: { t: 'delete' as const, p } };
      yield* withContents(blobs, changed, read);
    }
    await rm(join(this.sessionDir(chain.sessionId), STAMP_FILE), { force: true });
    const committed = this.committedPath(chain.sessionId);
    await applyEntries(entries(), committed);
    await flush(committed);
    await this.writeStamp(chain.sessionId, stampOf(chain));
    return { objects: read.objects.size, bytes: read.bytes };
  }

  /** The whole chain into a staging dir, swapped in for committed/ once complete and flushed. */
  private async materialise(chain: WorkspaceChain): Promise<void> {
    const committed = this.committedPath(chain.sessionId);
    await mkdir(dirname(committed), { recursive: true });
    const staging = stagingPath(committed, 'materialising');
    try {
      await mkdir(staging, { mode: 0o755 });
      await chown(staging, this.sandboxUid, this.sandboxUid);
      for (const entry of chain.entries) await this.applyObject(entry.key, staging);
      if (chain.entries.length > 0) await flush(staging);
      const old = stagingPath(committed, 'replaced');
      await rename(committed, old).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
      await rename(staging, committed);
      await fsyncPath(dirname(committed));
      await rm(old, { recursive: true, force: true });
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
    await this.writeStamp(chain.sessionId, stampOf(chain));
  }

  private async applyObject(key: string, dir: string): Promise<void> {
    const read = await this.blobs.get(key);
    await applyLayerArchive(read.body, dir);
  }

  /**
   * After the seal, before the store commit: the layer as one immutable object, keyed by
   * the hash of its bytes; null when the turn changed nothing (no object, no chain row).
   */
  async uploadLayer(layerDir: string): Promise<WorkspaceObjectRef | null> {
    const plan = JSON.parse(await readFile(join(layerDir, PLAN_FILE), 'utf8')) as PromotionPlan;
    if (plan.steps.length === 0) return null;
    return this.upload('layers', packLayer(plan, join(layerDir, 'upper')), join(layerDir, LAYER_ARCHIVE));
  }

  /**
   * A checkpoint's changes (a plan over the attempt's upper dir) packed, not yet uploaded:
   * in memory, or for an archive too large for memory in `scratch` (which the caller removes
   * once `putPacked` is done with it). The part of a capture the sandbox is frozen for: a
   * file that shrinks under the packer anyway (no freeze) fails it, never half-writes it.
   */
  async packCheckpoint(plan: PromotionPlan, upperDir: string, scratch: string): Promise<PackedObject> {
    const inMemory = await packLayerInMemory(plan, upperDir, 'fast', IN_MEMORY_BYTES);
    if (inMemory)
      return {
        sha256: createHash('sha256').update(inMemory).digest('hex'),
        size: inMemory.length,
        body: [inMemory],
      };
    return packed(packLayer(plan, upperDir, 'fast'), scratch);
  }

  /** A packed capture (a checkpoint, or a resident workspace's) as one immutable object under `prefix`. */
  putPacked(
    prefix: 'checkpoints' | 'layers' | 'snapshots',
    archive: PackedObject,
  ): Promise<WorkspaceObjectRef> {
    return this.put(prefix, archive);
  }

  /** Applies a checkpoint's object onto `dir` (a turn's merged view, so deletions become whiteouts). */
  applyCheckpoint(key: string, dir: string): Promise<void> {
    return this.applyObject(key, dir);
  }

  /**
   * After a promotion applied a committed layer to committed/: the stamp moves on to that
   * commit's version when it held the version before it; otherwise it stays, and the next
   * ensureCurrent brings the tree level with the chain.
   */
  async stampPromoted(
    sessionId: string,
    commit: { version: number; layer: WorkspaceObjectRef | null },
  ): Promise<void> {
    const stamp = (await this.readStamp(sessionId)) ?? { version: 0, layerVersion: 0, layerKey: null };
    if (stamp.version !== commit.version - 1) return;
    await this.writeStamp(
      sessionId,
      commit.layer
        ? { version: commit.version, layerVersion: commit.version, layerKey: commit.layer.key }
        : { ...stamp, version: commit.version },
    );
  }

  /** The committed tree of the stamp's version as one snapshot object; null when there is no stamp. */
  async uploadSnapshot(sessionId: string): Promise<(WorkspaceObjectRef & { version: number }) | null> {
    const stamp = await this.readStamp(sessionId);
    if (!stamp) return null;
    const scratch = stagingPath(join(this.sessionDir(sessionId), 'snapshot'), 'tgz');
    try {
      const ref = await this.upload('snapshots', packTree(this.committedPath(sessionId)), scratch);
      return { ...ref, version: stamp.version };
    } finally {
      await rm(scratch, { force: true });
    }
  }

  /**
   * Packs while hashing (in memory, or for a large archive to a local file), then puts it under `<prefix>/<sha256>.<random>`:
   * named by its content (a reader can check it) and by this upload alone, so garbage
   * collection, which deletes old objects no chain names, can never take an object from
   * under a commit about to name it (a second upload of the same bytes is a new, young one).
   */
  private async upload(
    prefix: string,
    archive: NodeJS.ReadableStream,
    file: string,
  ): Promise<WorkspaceObjectRef> {
    return this.put(prefix, await packed(archive, file));
  }

  private async put(prefix: string, { sha256, size, body }: PackedObject): Promise<WorkspaceObjectRef> {
    const key = `${prefix}/${sha256}.${randomBytes(8).toString('hex')}`;
    await this.blobs.put(key, body, {
      maxBytes: MAX_OBJECT_BYTES,
      expectedSha256: sha256,
      ifAbsent: true,
    });
    return { key, size };
  }

  /** Forgets the session's copy (its tree and stamp). */
  async drop(sessionId: string): Promise<void> {
    await rm(join(this.sessionDir(sessionId), STAMP_FILE), { force: true });
    await rm(this.committedPath(sessionId), { recursive: true, force: true });
  }
}

/**
 * An archive's bytes, hashed as they come: held in memory up to IN_MEMORY_BYTES (a turn's
 * usual layer costs no file written and read back), past that written to `file`.
 */
async function packed(archive: NodeJS.ReadableStream, file: string): Promise<PackedObject> {
  const hash = createHash('sha256');
  const held: Buffer[] = [];
  let size = 0;
  let spilled: WriteStream | null = null;
  let writeFailed: Error | null = null;
  try {
    for await (const chunk of archive as AsyncIterable<Buffer>) {
      hash.update(chunk);
      size += chunk.length;
      if (!spilled && size <= IN_MEMORY_BYTES) {
        held.push(chunk);
        continue;
      }
      if (!spilled) {
        spilled = createWriteStream(file);
        // A failed write (a full disk) fails the pack here, never as an uncaught error event.
        spilled.on('error', (err) => {
          writeFailed ??= err;
        });
        for (const early of held.splice(0)) spilled.write(early);
      }
      if (writeFailed) throw writeFailed;
      if (!spilled.write(chunk)) await once(spilled, 'drain');
    }
    if (spilled) {
      spilled.end();
      await finished(spilled);
    }
  } catch (err) {
    spilled?.destroy();
    throw err;
  }
  return { sha256: hash.digest('hex'), size, body: spilled ? createReadStream(file) : held };
}

/**
 * The items to apply, each file's content read from its object: a batch at a time, one
 * ranged get per run of members, the next batch read while this one is written. A file too
 * large to hold is streamed as it is written.
 */
async function* withContents(
  blobs: BlobStore,
  items: IndexedItem[],
  read: { objects: Set<string>; bytes: number },
): AsyncGenerator<{ entry: IndexedEntry; content?: AsyncIterable<Buffer> | Buffer[] }> {
  const batches: IndexedItem[][] = [];
  for (let i = 0; i < items.length; ) {
    const batch: IndexedItem[] = [];
    for (let bytes = 0; i < items.length && bytes < BATCH_BYTES; i++) {
      batch.push(items[i]!);
      bytes += sizeOfEntry(items[i]!);
    }
    batches.push(batch);
  }
  const readBatch = async (batch: IndexedItem[]): Promise<Map<IndexedItem, Buffer>> => {
    const contents = new Map<IndexedItem, Buffer>();
    const byObject = new Map<string, IndexedItem[]>();
    for (const item of batch)
      if (item.at?.indexed && sizeOfEntry(item) <= STREAMED_BYTES)
        byObject.set(item.at.key, [...(byObject.get(item.at.key) ?? []), item]);
    await Promise.all(
      [...byObject].map(async ([key, group]) => {
        const wants = group.map((it) => ({ o: it.at!.indexed!.o, length: sizeOfEntry(it) }));
        const bytes = await readIndexedBytes(blobs, key, group[0]!.at!.indexed!.archive, wants);
        for (const [n, it] of group.entries()) contents.set(it, bytes[n]!);
        read.objects.add(key);
        read.bytes += wants.reduce((sum, w) => sum + w.length, 0);
      }),
    );
    return contents;
  };
  let next = batches.length > 0 ? readBatch(batches[0]!) : null;
  for (const [b, batch] of batches.entries()) {
    const contents = await next!;
    next = b + 1 < batches.length ? readBatch(batches[b + 1]!) : null;
    next?.catch(() => {}); // awaited on the next pass; unawaited only if the apply stopped
    for (const item of batch) {
      const { at, entry } = item;
      const held = contents.get(item);
      if (held) yield { entry, content: [held] };
      else if (at?.indexed) {
        read.objects.add(at.key);
        read.bytes += sizeOfEntry(item);
        yield {
          entry,
          content: readIndexedContent(
            blobs,
            at.key,
            at.indexed.archive,
            at.indexed.o,
            entry.t === 'file' ? entry.s : 0,
          ),
        };
      } else yield { entry };
    }
  }
}

/** Whether a path is one the entries may have changed: a dir entry's own path, or at or under any other entry's. */
function touchedBy(entries: IndexedEntry[]): (path: string) => boolean {
  const exact = new Set<string>();
  const subtrees = new Set<string>();
  for (const e of entries) (e.t === 'dir' ? exact : subtrees).add(e.p);
  return (path) => {
    if (exact.has(path)) return true;
    for (let p = path; p !== '.' && p !== ''; p = dirname(p)) if (subtrees.has(p)) return true;
    return false;
  };
}

function sizeOfEntry(item: IndexedItem): number {
  return item.entry.t === 'file' ? item.entry.s : 0;
}

/** What makes two entries at one path the same on disk: content, mode, owner and time (not where the content is). */
function identityOf(entry: IndexedEntry): string {
  if (entry.t !== 'file') return JSON.stringify(entry);
  const { o: _at, ...rest } = entry;
  return JSON.stringify(rest);
}

/** The stamp of a tree at the chain's head. */
function stampOf(chain: WorkspaceChain): CacheStamp {
  const newest = chain.entries.at(-1);
  return { version: chain.version, layerVersion: newest?.version ?? 0, layerKey: newest?.key ?? null };
}

/** The stamp's newest layer is the chain's at that version, where the chain still has it. */
function sameHistory(stamp: CacheStamp, chain: WorkspaceChain): boolean {
  if (stamp.version > chain.version) return false;
  const atStamp = chain.entries.find((e) => e.kind === 'layer' && e.version === stamp.layerVersion);
  return atStamp === undefined || atStamp.key === stamp.layerKey;
}

function sizeOf(entries: { size: number }[]): number {
  return entries.reduce((sum, e) => sum + e.size, 0);
}

async function nonEmpty(dir: string): Promise<boolean> {
  return (await readdir(dir).catch(() => [])).length > 0;
}

/** The tree's contents reach the disk before a stamp names it (syncfs of its file system). */
async function flush(dir: string): Promise<void> {
  await run('sync', ['--file-system', dir]);
}
