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
 * later layer in the chain, those layers are applied in place; otherwise (absent, ahead,
 * from another history, compacted past it) the tree is materialised afresh from the
 * newest snapshot and the layers after it, in a staging dir swapped in whole.
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
import { applyLayerArchive, packLayer, packLayerInMemory, packTree } from './layer-archive.js';
import type { WorkspaceLayout } from './layout.js';
import { PLAN_FILE, type PromotionPlan } from './promotion.js';

const run = promisify(execFile);
const STAMP_FILE = 'committed.stamp';
const LAYER_ARCHIVE = 'layer.tgz';
/** An archive up to this size is packed in memory: one part of an S3 upload. */
const IN_MEMORY_BYTES = 8 * 1024 * 1024;
/** Layer and snapshot objects are as large as a workspace may be; the quota bounds them. */
const MAX_OBJECT_BYTES = Number.MAX_SAFE_INTEGER;

/** What a machine's copy holds: its version, and the newest layer it applied (to tell histories apart). */
export interface CacheStamp {
  version: number;
  layerVersion: number;
  layerKey: string | null;
}

/** Where a session's workspace objects live in the blob store. */
export const WORKSPACE_OBJECT_PREFIXES = ['layers/', 'snapshots/'] as const;
/** Where the checkpoints of running turns live in the blob store (named by turn_checkpoints rows). */
export const CHECKPOINT_OBJECT_PREFIX = 'checkpoints/';

export interface EnsuredWorkspace {
  version: number;
  /** What it took: nothing, layers applied in place, or the whole chain fetched. */
  how: 'current' | 'layers' | 'materialised' | 'adopted';
  objects: number;
  bytes: number;
}

export class WorkspaceCache {
  constructor(
    private readonly layout: WorkspaceLayout,
    private readonly blobs: BlobStore,
    /** Owner of the committed tree's root (the sandbox's non-root user). */
    private readonly sandboxUid: number,
  ) {}

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
    await this.materialise(chain);
    return {
      version: chain.version,
      how: 'materialised',
      objects: chain.entries.length,
      bytes: sizeOf(chain.entries),
    };
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
   * A checkpoint's changes (a plan over the attempt's upper dir) as one immutable object;
   * `scratch` is where an archive too large for memory is packed. Read while the turn runs:
   * a file that shrinks under the packer fails the checkpoint, never half-writes it.
   */
  async uploadCheckpoint(
    plan: PromotionPlan,
    upperDir: string,
    scratch: string,
  ): Promise<WorkspaceObjectRef> {
    const prefix = CHECKPOINT_OBJECT_PREFIX.slice(0, -1);
    const inMemory = await packLayerInMemory(plan, upperDir, 'fast', IN_MEMORY_BYTES);
    if (inMemory) return this.uploadBytes(prefix, inMemory);
    try {
      return await this.upload(prefix, packLayer(plan, upperDir, 'fast'), scratch);
    } finally {
      await rm(scratch, { force: true });
    }
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
    const { sha256, size, body } = await packed(archive, file);
    const key = `${prefix}/${sha256}.${randomBytes(8).toString('hex')}`;
    await this.blobs.put(key, body, {
      maxBytes: MAX_OBJECT_BYTES,
      expectedSha256: sha256,
      ifAbsent: true,
    });
    return { key, size };
  }

  /** An archive already in memory, put as upload() puts a streamed one. */
  private async uploadBytes(prefix: string, archive: Buffer): Promise<WorkspaceObjectRef> {
    const sha256 = createHash('sha256').update(archive).digest('hex');
    const key = `${prefix}/${sha256}.${randomBytes(8).toString('hex')}`;
    await this.blobs.put(key, [archive], {
      maxBytes: MAX_OBJECT_BYTES,
      expectedSha256: sha256,
      ifAbsent: true,
    });
    return { key, size: archive.length };
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
async function packed(
  archive: NodeJS.ReadableStream,
  file: string,
): Promise<{ sha256: string; size: number; body: Iterable<Uint8Array> | AsyncIterable<Uint8Array> }> {
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
