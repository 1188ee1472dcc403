/**
 * Session workspaces as two layers (DESIGN "Sandboxes, turns and the workspace"), laid out
 * as layout.ts says:
 *
 *   committed/        the committed layer: only promotion writes it
 *   layers/<turn>/    one attempt layer per turn: upper/, work/, plan.json
 *   slots/<sandbox>/  where a turn's overlay is mounted; bind-mounted into that sandbox at
 *                     /workspace with rslave propagation (slots/ itself is an rshared mount)
 *
 * A turn sees committed state plus its own writes and nothing else; an aborted turn's layer
 * is deleted; a committed one is sealed and uploaded before the store commit and promoted
 * after it. No writable directory is ever shared by two sandboxes. `committed/` is this
 * machine's cache of the session's chain in the blob store (workspace-cache.ts): brought
 * level with the store before every turn.
 */
import { randomBytes } from 'node:crypto';
import { chown, mkdir, readdir, rm, rmdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { BlobStore } from '../blobs/index.js';
import {
  asDiskFull,
  BerthError,
  isNoSpace,
  type ResidentMarker,
  type WorkspaceChain,
  type WorkspaceObjectRef,
} from '../core/index.js';
import { type CapturedCheckpoint, packDelta, uploadCaptured } from './captures.js';
import { type CheckpointIndex, scanAttempt } from './checkpoint-scan.js';
import {
  type CopyOnDisk,
  type EvictOutcome,
  evictCopy,
  listCopies,
  pinCopy,
  unpinCopy,
} from './copy-eviction.js';
import { type WorkspaceLayout, workspaceLayout } from './layout.js';
import { makeSharedMountRoot, mountOverlay, unmountAll } from './overlay-mounts.js';
import { applyPlan, PLAN_FILE, sealLayer } from './promotion.js';
import { WorkspaceQuota } from './quota.js';
import { emptyResidentWorkspace, readResidentMarker, writeResidentMarker } from './resident-marker.js';
import { listLayerFiles, writeSlotFile } from './slot-files.js';
import { type EnsuredWorkspace, WorkspaceCache } from './workspace-cache.js';

export class Workspaces {
  readonly slotsDir: string;
  private readonly sessionsDir: string;
  private readonly layout: WorkspaceLayout;
  private readonly cache: WorkspaceCache;
  /** This process's uses of each session's copy (pinCopy). */
  private readonly pins = new Map<string, number>();
  /** Sizes of copies last measured, by session (listCopies). */
  private readonly measured = new Map<string, { mtimeMs: number; bytes: number }>();

  constructor(
    dataDir: string,
    /** Owner of what the sandbox writes (its non-root user). */
    readonly sandboxUid: number,
    /** Where the sessions' workspace chains live (shared by every machine of the install). */
    blobs: BlobStore,
  ) {
    this.layout = workspaceLayout(dataDir);
    this.slotsDir = this.layout.slotsDir;
    this.sessionsDir = this.layout.sessionsDir;
    this.cache = new WorkspaceCache(this.layout, blobs, sandboxUid);
  }

  /** Brings this machine's copy of the session's committed workspace level with its chain. */
  ensureCurrent(chain: WorkspaceChain): Promise<EnsuredWorkspace> {
    return orDiskFull(this.cache.ensureCurrent(chain), `bringing session ${chain.sessionId}'s copy level`);
  }

  /** A sealed layer as an object of the blob store (before its commit); null when the turn changed nothing. */
  uploadLayer(sessionId: string, turnId: string): Promise<WorkspaceObjectRef | null> {
    return orDiskFull(
      this.cache.uploadLayer(this.layerPath(sessionId, turnId)),
      `uploading turn ${turnId}'s layer`,
    );
  }

  /** The committed tree as one snapshot object, with the version it holds. */
  uploadSnapshot(sessionId: string): Promise<(WorkspaceObjectRef & { version: number }) | null> {
    return this.cache.uploadSnapshot(sessionId);
  }

  /**
   * This process uses the session's copy (its sandbox is bound, or it runs a turn) until
   * unpinCopy: no process sharing the data dir evicts it meanwhile. Waits out an eviction
   * already under way. Counted, so two uses in this process need two unpins.
   */
  async pinCopy(sessionId: string): Promise<void> {
    const uses = (this.pins.get(sessionId) ?? 0) + 1;
    this.pins.set(sessionId, uses);
    if (uses === 1) await pinCopy(this.layout, sessionId, Date.now);
  }

  async unpinCopy(sessionId: string): Promise<void> {
    const uses = (this.pins.get(sessionId) ?? 1) - 1;
    if (uses > 0) {
      this.pins.set(sessionId, uses);
      return;
    }
    this.pins.delete(sessionId);
    await unpinCopy(this.layout, sessionId);
  }

  /** Every session's copy on the data dir, measured (copy-eviction.ts). */
  listCopies(): Promise<CopyOnDisk[]> {
    return listCopies(this.layout, this.measured);
  }

  /** Gives up the session's copy unless a process uses it; its next turn materialises it from the chain. */
  evictCopy(sessionId: string): Promise<EvictOutcome> {
    return evictCopy(this.layout, sessionId, Date.now);
  }

  slotPath(sandboxName: string): string {
    return this.layout.slotPath(sandboxName);
  }

  committedPath(sessionId: string): string {
    return this.layout.committedPath(sessionId);
  }

  private layerPath(sessionId: string, turnId: string): string {
    return this.layout.layerPath(sessionId, turnId);
  }

  /** Makes the slot root a shared mount and proves overlayfs works here; fails at start, not at the first turn. */
  async prepare(): Promise<void> {
    await mkdir(this.slotsDir, { recursive: true, mode: 0o755 });
    await mkdir(this.sessionsDir, { recursive: true, mode: 0o755 });
    // Per process: workers starting together on one data dir must not share the probe.
    const probe = join(this.sessionsDir, `.overlay-probe-${process.pid}-${randomBytes(4).toString('hex')}`);
    try {
      for (const d of ['lower', 'upper', 'work', 'merged']) await mkdir(join(probe, d), { recursive: true });
      await mountOverlay(join(probe, 'merged'), {
        lower: join(probe, 'lower'),
        upper: join(probe, 'upper'),
        work: join(probe, 'work'),
      });
      await unmountAll(join(probe, 'merged'));
      await makeSharedMountRoot(this.slotsDir);
    } catch (err) {
      throw new BerthError(
        'WORKSPACE_UNAVAILABLE',
        `Cannot mount overlayfs under ${this.sessionsDir}: ${firstLine((err as { stderr?: string }).stderr) || (err as Error).message}`,
        { cause: err },
      );
    } finally {
      await rm(probe, { recursive: true, force: true });
    }
  }

  /** Undoes prepare() (the shared slot root mount), so the data dir can be removed. Only when no worker uses it. */
  async release(): Promise<void> {
    await unmountAll(this.slotsDir);
  }

  /** The (empty, unmounted) directory a sandbox gets as /workspace. */
  async openSlot(sandboxName: string): Promise<string> {
    const slot = this.slotPath(sandboxName);
    await mkdir(slot, { recursive: true, mode: 0o755 });
    return slot;
  }

  /** Writes `folder/name` into the sandbox's mounted workspace (slot-files.ts). */
  placeFile(
    sandboxName: string,
    folder: string,
    name: string,
    body: AsyncIterable<Uint8Array>,
  ): Promise<void> {
    return writeSlotFile(this.slotPath(sandboxName), folder, name, body, this.sandboxUid);
  }

  /** The files turn `turnId` wrote or changed directly in `folder` (its attempt layer's upper dir). */
  turnFiles(sessionId: string, turnId: string, folder: string) {
    return listLayerFiles(join(this.layerPath(sessionId, turnId), 'upper', folder));
  }

  /** Mounts committed + a fresh attempt layer for this turn on the sandbox's slot. */
  async mountAttempt(sessionId: string, turnId: string, sandboxName: string): Promise<void> {
    const committed = this.committedPath(sessionId);
    const layer = this.layerPath(sessionId, turnId);
    // In parallel: on the turn's critical path, and each directory created is a journal write.
    const made = Promise.all([
      mkdir(committed, { recursive: true, mode: 0o755 }).then(() =>
        chown(committed, this.sandboxUid, this.sandboxUid),
      ),
      mkdir(join(layer, 'upper'), { recursive: true, mode: 0o755 }).then(() =>
        chown(join(layer, 'upper'), this.sandboxUid, this.sandboxUid),
      ),
      mkdir(join(layer, 'work'), { recursive: true, mode: 0o700 }),
      // A gVisor sandbox starts after its layer is mounted: its slot may not exist yet.
      mkdir(this.slotPath(sandboxName), { recursive: true, mode: 0o755 }),
    ]);
    await orDiskFull(made, `making turn ${turnId}'s attempt layer`);
    await mountOverlay(this.slotPath(sandboxName), {
      lower: committed,
      upper: join(layer, 'upper'),
      work: join(layer, 'work'),
    });
  }

  /**
   * A resident sandbox's workspace: the committed layer itself, written in place for the
   * sandbox's whole life (its processes outlive turns, so no turn has a layer of its own).
   * It is the upper dir of an overlay over an empty lower one: the same mount options
   * (nosuid, nodev) and the same propagation as a turn's overlay. Mounted before the
   * sandbox starts, which gVisor needs and runc does not mind: it stays for the sandbox's life.
   */
  async mountResident(sessionId: string, sandboxName: string): Promise<void> {
    const committed = this.committedPath(sessionId);
    const own = this.layout.residentPath(sessionId);
    await Promise.all([
      mkdir(committed, { recursive: true, mode: 0o755 }).then(() =>
        chown(committed, this.sandboxUid, this.sandboxUid),
      ),
      mkdir(join(own, 'lower'), { recursive: true, mode: 0o755 }),
      mkdir(join(own, 'work'), { recursive: true, mode: 0o700 }),
      mkdir(this.slotPath(sandboxName), { recursive: true, mode: 0o755 }),
    ]);
    await mountOverlay(this.slotPath(sandboxName), {
      lower: join(own, 'lower'),
      upper: committed,
      work: join(own, 'work'),
    });
  }

  /** The marker of the data dir holding the session's resident workspace here; null when absent or unreadable. */
  readResidentMarker(sessionId: string): Promise<ResidentMarker | null> {
    return readResidentMarker(this.layout, sessionId);
  }

  /** This data dir holds the session's resident workspace: written before the store says so. */
  writeResidentMarker(marker: ResidentMarker): Promise<void> {
    return writeResidentMarker(this.layout, marker);
  }

  /** Drops resident files an operator's reset gave up (before the sandbox mounts). */
  emptyResident(sessionId: string): Promise<void> {
    return emptyResidentWorkspace(this.layout, sessionId);
  }

  /**
   * The session's quota over committed + this turn's layer (call after mountAttempt); for
   * a resident sandbox (turnId null), over the committed layer it writes in place.
   */
  async quota(sessionId: string, turnId: string | null, limitBytes: number): Promise<WorkspaceQuota> {
    const committed = this.committedPath(sessionId);
    const dirs =
      turnId === null
        ? { committed: null, upper: committed }
        : { committed, upper: join(this.layerPath(sessionId, turnId), 'upper') };
    return WorkspaceQuota.measure({ ...dirs, sessionId, turnId: turnId ?? 'resident' }, limitBytes);
  }

  /** Writes the promotion plan of a finished turn; the only step of a commit that needs disk space. */
  async seal(sessionId: string, turnId: string, sandboxName: string): Promise<void> {
    const layer = this.layerPath(sessionId, turnId);
    const slot = this.slotPath(sandboxName);
    try {
      // The plan is read off the merged view: without the overlay on the slot (unmounted by a
      // clean-up that took its worker for dead) it would plan to delete every committed file.
      await assertMounted(slot);
      await sealLayer({
        upper: join(layer, 'upper'),
        merged: slot,
        committed: this.committedPath(sessionId),
        planFile: join(layer, PLAN_FILE),
      });
      await assertMounted(slot);
    } catch (err) {
      throw new BerthError(
        isNoSpace(err) ? 'DISK_FULL' : 'WORKSPACE_FAILED',
        `Sealing the workspace of turn ${turnId} failed: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  /**
   * The turn's attempt layer as a checkpoint index (checkpoint-scan.ts), read through the
   * overlay on the sandbox's slot; call while it is mounted.
   */
  async scanCheckpoint(sessionId: string, turnId: string, sandboxName: string): Promise<CheckpointIndex> {
    const slot = this.slotPath(sandboxName);
    await assertMounted(slot);
    return scanAttempt({
      upper: join(this.layerPath(sessionId, turnId), 'upper'),
      merged: slot,
      committed: this.committedPath(sessionId),
    });
  }

  /**
   * What changed in the turn's attempt layer since `before` (an index of the previous
   * checkpoint), scanned and packed but not uploaded: the part of a checkpoint its sandbox
   * is frozen for. `archive` is null when nothing changed. Returns the index now, the base
   * of the next checkpoint. Pass the result to `uploadCheckpoint`, which removes its scratch.
   */
  async captureCheckpoint(
    sessionId: string,
    turnId: string,
    sandboxName: string,
    before: CheckpointIndex,
  ): Promise<CapturedCheckpoint> {
    const index = await this.scanCheckpoint(sessionId, turnId, sandboxName);
    const layer = this.layerPath(sessionId, turnId);
    return packDelta(this.cache, before, index, join(layer, 'upper'), layer);
  }

  /**
   * A resident workspace's changes since `before` (the index of its last capture; an empty
   * one for a full capture), scanned and packed from the committed dir it is written in
   * (the upper dir of its overlay, whose lower one is empty: no whiteouts), as a checkpoint
   * is. Call with the sandbox frozen; pass the result to `uploadCapture`.
   */
  async captureResident(sessionId: string, before: CheckpointIndex): Promise<CapturedCheckpoint> {
    const committed = this.committedPath(sessionId);
    const own = this.layout.residentPath(sessionId);
    const index = await scanAttempt({ upper: committed, merged: committed, committed: join(own, 'lower') });
    return packDelta(this.cache, before, index, committed, own);
  }

  /** A captured checkpoint as an object in the blob store; null when it holds no change. */
  uploadCheckpoint(captured: CapturedCheckpoint): Promise<WorkspaceObjectRef | null> {
    return uploadCaptured(this.cache, captured, 'checkpoints');
  }

  /** A resident capture as an object of the session's chain (garbage once no chain row names it); null when it holds no change. */
  uploadCapture(
    captured: CapturedCheckpoint,
    kind: 'layer' | 'snapshot',
  ): Promise<WorkspaceObjectRef | null> {
    return uploadCaptured(this.cache, captured, kind === 'layer' ? 'layers' : 'snapshots');
  }

  /**
   * A resident workspace whose files are elsewhere, made here from the chain's capture: the
   * copy this data dir had (files of an older holding, whose stamp says nothing of what was
   * written in place) is dropped, and the chain materialised afresh.
   */
  async materialiseResident(chain: WorkspaceChain): Promise<EnsuredWorkspace> {
    await this.cache.drop(chain.sessionId);
    return this.ensureCurrent(chain);
  }

  /**
   * Restores checkpoints (their objects, oldest first) into a freshly mounted attempt: each
   * is applied through the overlay on the slot, so its files land in the upper dir and its
   * deletions become whiteouts over the committed layer. Call before the sandbox is handed
   * the turn.
   */
  async restoreCheckpoints(sandboxName: string, keys: string[]): Promise<void> {
    const slot = this.slotPath(sandboxName);
    await assertMounted(slot);
    for (const key of keys) await this.cache.applyCheckpoint(key, slot);
  }

  /** Takes the turn's overlay off the slot (the next turn mounts a fresh one). */
  async unmountSlot(sandboxName: string): Promise<void> {
    await unmountAll(this.slotPath(sandboxName));
  }

  async closeSlot(sandboxName: string): Promise<void> {
    await unmountAll(this.slotPath(sandboxName));
    await rmdir(this.slotPath(sandboxName)).catch(() => undefined);
  }

  /**
   * Applies a sealed, committed layer to the committed layer. Idempotent. The layer stays:
   * the caller discards it once the store knows it was promoted (markLayerPromoted), so a
   * crash in between leaves it on disk, where the clean-up finds it and marks it. Told what
   * the commit was (its version and object), the copy's stamp moves on with it. False when
   * there was no plan here to apply.
   */
  async promote(
    sessionId: string,
    turnId: string,
    commit: { version: number; layer: WorkspaceObjectRef | null } | null,
  ): Promise<boolean> {
    const layer = this.layerPath(sessionId, turnId);
    // No plan: a crash cut a discard short after the plan was fully applied, or the layer
    // was sealed on another machine (this copy catches up from the chain before its next turn).
    if (!(await exists(join(layer, PLAN_FILE)))) return false;
    await applyPlan(join(layer, PLAN_FILE), {
      upper: join(layer, 'upper'),
      committed: this.committedPath(sessionId),
    });
    if (commit) await this.cache.stampPromoted(sessionId, commit);
    return true;
  }

  /** Whether this machine holds the turn's attempt layer. */
  async hasLayer(sessionId: string, turnId: string): Promise<boolean> {
    return exists(this.layerPath(sessionId, turnId));
  }

  /** Drops an aborted or abandoned attempt layer, or a promoted one the store has marked. */
  async discard(sessionId: string, turnId: string): Promise<void> {
    await rm(this.layerPath(sessionId, turnId), { recursive: true, force: true });
  }

  /** Every attempt layer on disk, for recovery at start. */
  async listLayers(): Promise<{ sessionId: string; turnId: string }[]> {
    const out: { sessionId: string; turnId: string }[] = [];
    for (const sessionId of await readdir(this.sessionsDir).catch(() => [])) {
      for (const turnId of await readdir(this.layout.layersDir(sessionId)).catch(() => [])) {
        out.push({ sessionId, turnId });
      }
    }
    return out;
  }

  async listSlots(): Promise<string[]> {
    return readdir(this.slotsDir).catch(() => []);
  }
}

/** A mount point has a device of its own: the overlay's, not its parent directory's. */
async function assertMounted(dir: string): Promise<void> {
  const [self, parent] = await Promise.all([stat(dir), stat(dirname(dir))]);
  if (self.dev === parent.dev) throw new Error(`the turn's overlay is no longer mounted on ${dir}`);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** A step of a turn's path on the data dir: a full disk fails it as DISK_FULL (retried), never as corruption. */
async function orDiskFull<T>(step: Promise<T>, what: string): Promise<T> {
  try {
    return await step;
  } catch (err) {
    throw asDiskFull(err, what);
  }
}

function firstLine(text: string | undefined): string {
  return (text ?? '').trim().split('\n')[0] ?? '';
}
