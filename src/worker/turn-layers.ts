/**
 * A session's turns meet its workspace the way its SandboxMode says: what is mounted
 * before the sandbox is bound and what after, what a commit seals, and when a turn's
 * layer is settled (promoted if the store says committed, else dropped). The mode is
 * data; this is the one place that acts on it.
 */
import { createReadStream } from 'node:fs';
import type { Logger } from 'pino';
import {
  BerthError,
  CHANNEL_FILES_PREFIX,
  type CheckpointTaken,
  type CommitInput,
  failpoint,
  INBOX_DIR,
  type InboxFile,
  inboxFilesOf,
  type Message,
  OUTBOX_DIR,
  OUTBOX_MAX_BYTES,
  type ResumedCheckpoint,
  type Session,
  safeInboxName,
  type Turn,
} from '../core/index.js';
import type { Fence } from '../store/index.js';
import { claimResidentWorkspace } from './claim-resident-workspace.js';
import type { SandboxDeps } from './deps.js';
import { ResidentCapture } from './resident-capture.js';
import type { SandboxMode } from './sandbox-modes.js';
import { TurnCheckpoints } from './turn-checkpoints.js';
import { TurnWorkspace } from './turn-workspace.js';

export class TurnLayers {
  /** The chain's side of a layered mode's turns; none for a sandbox that writes in place. */
  private readonly workspace: TurnWorkspace | null;
  /** The checkpoints of a layered mode's turns; none for a sandbox that writes in place. */
  private readonly checkpoints: TurnCheckpoints | null;
  /** The checkpoint the current turn resumed from, for its assignment. */
  private resumed: { turnId: string; from: ResumedCheckpoint | null } | null = null;

  /** A resident session's workspace version: the claim's, one more after each commit of this supervision. */
  private residentVersion: number;
  /** Captures a resident workspace into the chain after each commit; none for a layered mode. */
  private readonly capture: ResidentCapture | null;

  constructor(
    private readonly deps: SandboxDeps,
    private readonly mode: SandboxMode,
    /** The session as its claim read it, under `fence`. */
    private readonly session: Session,
    private readonly fence: Fence,
    private readonly sandboxName: string,
    private readonly log: Logger,
  ) {
    this.residentVersion = session.workspaceVersion;
    this.workspace = mode.settle === 'in-place' ? null : new TurnWorkspace(deps, session.id, log);
    this.checkpoints = mode.settle === 'in-place' ? null : new TurnCheckpoints(deps, fence, sandboxName, log);
    this.capture = mode.settle === 'in-place' ? new ResidentCapture(deps, fence, sandboxName, log) : null;
  }

  /**
   * Mounts the turn's workspace and places the files its messages carry, binding the
   * sandbox (`bind`) at the point the mode needs it bound: the files are in place before
   * a sandbox that sees only what was there at its start (gVisor) starts, and always
   * before the sandbox gets the turn.
   */
  async prepare(turn: Turn, messages: Message[], bound: boolean, bind: () => Promise<void>): Promise<void> {
    switch (this.mode.mountBeforeBind) {
      case 'nothing':
        if (!bound) await bind();
        await this.mountAttempt(turn);
        return this.placeInbox(messages);
      case 'attempt-layer':
        await this.mountAttempt(turn);
        await this.placeInbox(messages);
        if (!bound) await bind();
        return;
      case 'committed-layer':
        if (!bound) {
          // Written in place, the files live on one data dir only: never mount an empty one in their stead.
          await claimResidentWorkspace(this.deps, this.session, this.fence, this.log);
          await this.deps.workspaces.mountResident(this.session.id, this.sandboxName);
        }
        await this.placeInbox(messages);
        if (!bound) await bind();
        return;
    }
  }

  /**
   * A chat message's files (core/inbox.ts) into `inbox/`, in the turn's attempt layer: they
   * are committed with the turn, or dropped with it and placed again by its retry. A
   * resident sandbox gets them in place (placed again, the same bytes, by a retry).
   */
  private async placeInbox(messages: Message[]): Promise<void> {
    const { workspaces, blobs } = this.deps;
    for (const message of messages)
      for (const file of inboxFilesOf(message.data)) {
        const read = await blobs.get(file.key);
        await workspaces.placeFile(this.sandboxName, INBOX_DIR, file.name, read.body);
        this.log.info({ messageId: message.id, name: file.name, bytes: read.size }, 'Inbox file placed');
      }
  }

  /** The checkpoint `turn` resumed from (its workspace holds its files); null when it starts from the committed tree. */
  resumedFrom(turn: Turn): ResumedCheckpoint | null {
    return this.resumed?.turnId === turn.id ? this.resumed.from : null;
  }

  /** POST /v1/checkpoint of the turn: durable when it returns. */
  checkpoint(turnId: string, label: string): Promise<CheckpointTaken> {
    if (!this.checkpoints)
      throw new BerthError(
        'CHECKPOINT_UNSUPPORTED',
        `Session ${this.session.id} writes its workspace in place (resident): its turn ${turnId} has no attempt layer to checkpoint`,
      );
    return this.checkpoints.take(turnId, label);
  }

  /** A model call's checkpoint (null: nothing changed, or a sandbox writing in place has none). */
  async checkpointModelCall(turnId: string): Promise<CheckpointTaken | null> {
    return this.checkpoints ? this.checkpoints.takeAtModelCall(turnId) : null;
  }

  /** The layer the quota watch measures with the committed one; null = the committed layer itself. */
  quotaLayerOf(turn: Turn): string | null {
    return this.workspace ? turn.id : null;
  }

  /** Before the commit transaction (the gateway's beforeCommit): what the commit must carry of the workspace. */
  async seal(turnId: string): Promise<CommitInput['workspace']> {
    // In place: the commit names the data dir the turn wrote, which must be the one the store says holds it.
    if (this.workspace) {
      const sealed = await this.workspace.seal(turnId, this.sandboxName);
      const outbox = await this.storeOutbox(turnId);
      return outbox.length > 0 ? { ...sealed, outbox } : sealed;
    }
    return { baseVersion: this.residentVersion, residentHolder: this.deps.dataDir.id };
  }

  /** After a commit the sandbox serves on from: true while the turn's layer is still owed (settled once the sandbox is gone). */
  async afterCommit(turn: Turn): Promise<boolean> {
    switch (this.mode.settle) {
      case 'after-commit':
        await this.settle(turn.id, 'turn-end');
        this.checkpoints?.collect(turn.id);
        return false;
      // Its writes are already in the committed layer: nothing to promote, only the mark to clear.
      case 'in-place':
        this.residentVersion += 1;
        await this.deps.store.markLayerPromoted(this.session.id, turn.id);
        await this.capture?.afterCommit(turn.id, this.residentVersion);
        return false;
      case 'after-kill':
        this.checkpoints?.collect(turn.id);
        return true;
    }
  }

  /**
   * Before a sandbox that writes in place is released alive between turns: its workspace
   * captured into the chain (resident-capture.ts), so a planned move loses nothing.
   */
  async beforeRelease(): Promise<void> {
    if (this.capture) this.residentVersion = await this.capture.beforeRelease(this.residentVersion);
  }

  /**
   * Takes a finished turn's layer off the slot and promotes it if the store says committed,
   * else drops it: at the turn's end, or at the claim for a layer a crash left owed.
   */
  async settle(turnId: string, at: 'turn-end' | 'claim'): Promise<void> {
    const { store, workspaces } = this.deps;
    await workspaces.unmountSlot(this.sandboxName);
    if ((await store.getTurn(turnId))?.status === 'committed') {
      failpoint('before-promote');
      const applied = await workspaces.promote(
        this.session.id,
        turnId,
        this.workspace?.committedAs(turnId) ?? null,
      );
      failpoint('before-mark-promoted');
      await store.markLayerPromoted(this.session.id, turnId);
      this.log.info({ turnId, by: at, planApplied: applied }, 'Layer promoted');
      await workspaces.discard(this.session.id, turnId);
      await this.workspace?.afterPromotion(turnId);
      return;
    }
    await workspaces.discard(this.session.id, turnId);
  }

  /**
   * The files the turn wrote under outbox/ (its layer's own: written or changed in this
   * turn), stored as blobs for its commit to send to the session's chat. One too big to send
   * is left in the workspace and logged. Stored under keys of the turn: a repeated seal
   * stores nothing new.
   */
  private async storeOutbox(turnId: string): Promise<InboxFile[]> {
    const { workspaces, blobs } = this.deps;
    const files: InboxFile[] = [];
    const found = await workspaces.turnFiles(this.session.id, turnId, OUTBOX_DIR);
    for (const [i, file] of found.entries()) {
      if (file.size > OUTBOX_MAX_BYTES || file.name !== safeInboxName(file.name, '')) {
        this.log.warn({ turnId, name: file.name, bytes: file.size }, 'Outbox file not sent');
        continue;
      }
      const key = `${CHANNEL_FILES_PREFIX}out/${this.session.id.replace(/[^A-Za-z0-9_-]/g, '_')}/${turnId}-${i}`;
      const put = await blobs.put(key, createReadStream(file.path), {
        maxBytes: OUTBOX_MAX_BYTES,
        ifAbsent: true,
      });
      files.push({ name: file.name, key, size: put.size });
    }
    return files;
  }

  private async mountAttempt(turn: Turn): Promise<void> {
    const { workspaces } = this.deps;
    await this.workspace!.bringCurrent(turn);
    await workspaces.mountAttempt(this.session.id, turn.id, this.sandboxName);
    // A retry of checkpointed messages starts where their last checkpoint left them.
    const from = await this.checkpoints!.resume(turn, async () => {
      await workspaces.unmountSlot(this.sandboxName);
      await workspaces.discard(this.session.id, turn.id);
      await workspaces.mountAttempt(this.session.id, turn.id, this.sandboxName);
    });
    this.resumed = { turnId: turn.id, from };
  }
}
