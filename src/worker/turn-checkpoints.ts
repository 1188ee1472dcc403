/**
 * Checkpoints of a layered turn (a `command` job's berth-checkpoint, POST /v1/checkpoint;
 * every model call of an anthropic or openai loop, from the gateway's model proxy):
 * the files its attempt layer changed since the previous checkpoint go to the blob store as
 * one object (scanned and packed with the sandbox frozen, uploaded once it is thawed), then
 * one fenced store transaction records it as the next checkpoint of the
 * work on the turn's lead message, and only then is the job answered. A retry of those
 * messages, on any machine, restores the newest checkpoint's chain (the objects from its
 * base back to the committed tree, oldest first) into its fresh attempt layer before the
 * sandbox is handed the turn, and tells the job how far it got (BERTH_CHECKPOINT).
 *
 * Invariants:
 * - Never half-used: a row is written only after its object is whole in the blob store, and
 *   this turn's next checkpoint is a delta over the last one it *recorded* (a failed upload
 *   or record leaves the base where it was). A row's base names the checkpoint its object
 *   is a delta over, so a resume follows bases back from the newest row and a checkpoint
 *   whose record answer was lost (but which committed) is simply skipped by the next one.
 * - A resume that cannot restore its chain (an object lost, a blob store that stays away)
 *   starts again from the committed tree with base 0: redone work, never a mixed tree.
 * - Frozen for the scan and pack only: the sandbox is thawed in every case (a finally)
 *   before the upload and the record, which wait on the network. A worker killed while it
 *   is frozen leaves it frozen; whoever kills it next thaws it first (SandboxRuntime.kill).
 * - One checkpoint at a time per turn: calls queue behind each other.
 * - A resume applies at most MAX_CHAIN objects: past it, a checkpoint is a full one over
 *   the committed tree (base 0), which starts a new chain.
 * - Not a commit: replies, state and the workspace version move only at the turn's commit,
 *   whose transaction deletes the rows; the objects go right after it here (best effort)
 *   and otherwise with the worker's garbage collection.
 */
import type { Logger } from 'pino';
import {
  BerthError,
  type CheckpointTaken,
  failpoint,
  isBerthError,
  type ResumedCheckpoint,
  type Turn,
  type TurnCheckpoint,
  type WorkspaceObjectRef,
} from '../core/index.js';
import { whileFrozen } from '../runtime/index.js';
import type { Fence } from '../store/index.js';
import { fenceError } from '../store/index.js';
import type { CheckpointIndex } from '../workspace/index.js';
import type { SandboxDeps } from './deps.js';

/**
 * A resume applies one object per checkpoint of its chain; a full checkpoint every
 * MAX_CHAIN bounds that, at the price of uploading the whole attempt layer once in so many
 * (a turn that checkpoints 200 times uploads it about 200 / 16 times, each change otherwise once).
 */
const MAX_CHAIN = 16;
/** The label of a checkpoint taken at a model call (a job's own are the job's). */
export const MODEL_CALL_LABEL = 'model-call';

interface Work {
  turnId: string;
  /** The lead message: checkpoints belong to the work on it, across tries. */
  messageId: number;
  /** The attempt layer as of the newest checkpoint this turn recorded or resumed from. */
  index: CheckpointIndex;
  /** That checkpoint's number (0: none, the committed tree), how many checkpoints its files hold, and its chain's length. */
  seq: number;
  count: number;
  chain: number;
  /** The objects of this work this worker knows of, to delete once it commits. */
  keys: Set<string>;
  /** The checkpoint being taken, which the next one waits for. */
  queue: Promise<unknown>;
}

export class TurnCheckpoints {
  private work: Work | null = null;

  constructor(
    private readonly deps: SandboxDeps,
    private readonly fence: Fence,
    private readonly sandboxName: string,
    private readonly log: Logger,
    /** The longest chain a resume applies: past it, the next checkpoint is a full one (base 0). */
    private readonly maxChain = MAX_CHAIN,
  ) {}

  /**
   * After the turn's fresh attempt is mounted and before the sandbox is handed the turn:
   * the newest checkpoint of its messages' work restored into it. null when there is none
   * (or its chain could not be restored: then `remount` gives a fresh attempt again).
   */
  async resume(turn: Turn, remount: () => Promise<void>): Promise<ResumedCheckpoint | null> {
    const { store, workspaces } = this.deps;
    const messageId = Math.min(...turn.messageIds);
    const rows = await store.listCheckpoints(this.fence.sessionId, messageId);
    const chain = chainOf(rows);
    const keys = new Set(rows.map((r) => r.key).filter(Boolean));
    let resumed: { seq: number; count: number; label: string } | null = null;
    if (chain) {
      const startedAt = performance.now();
      try {
        await workspaces.restoreCheckpoints(this.sandboxName, chain.map((c) => c.key).filter(Boolean));
        const newest = chain.at(-1)!;
        resumed = { seq: newest.seq, count: newest.count, label: newest.label };
        this.log.info(
          {
            turnId: turn.id,
            seq: newest.seq,
            count: newest.count,
            chain: chain.length,
            objects: chain.filter((c) => c.key).length,
            ms: Math.round(performance.now() - startedAt),
          },
          'Turn resumed from a checkpoint',
        );
      } catch (err) {
        this.log.warn(
          { err, turnId: turn.id, seq: chain.at(-1)!.seq },
          'Checkpoint not restored; the turn starts from the committed tree',
        );
        await remount();
      }
    } else if (rows.length > 0)
      this.log.warn(
        { turnId: turn.id, rows: rows.length },
        'Checkpoint chain broken; the turn starts from the committed tree',
      );
    const index = await workspaces.scanCheckpoint(this.fence.sessionId, turn.id, this.sandboxName);
    this.work = {
      turnId: turn.id,
      messageId,
      index,
      seq: resumed?.seq ?? 0,
      count: resumed?.count ?? 0,
      chain: resumed ? (chain?.length ?? 0) : 0,
      keys,
      queue: Promise.resolve(),
    };
    return resumed ? { count: resumed.count, label: resumed.label } : null;
  }

  /** POST /v1/checkpoint: answered once the checkpoint is durable; CHECKPOINT_FAILED (nothing of it used) otherwise. */
  take(turnId: string, label: string): Promise<CheckpointTaken> {
    return this.enqueue(turnId, label, false) as Promise<CheckpointTaken>;
  }

  /**
   * At a model call (the gateway's model proxy, before it forwards the request): as `take`,
   * but a turn that changed nothing since its last checkpoint records nothing (null), so
   * the call waits only for the scan.
   */
  takeAtModelCall(turnId: string): Promise<CheckpointTaken | null> {
    return this.enqueue(turnId, MODEL_CALL_LABEL, true);
  }

  /**
   * After the turn's commit: its checkpoints' objects, whose rows the commit deleted, are
   * deleted in the background (off the next turn's path; what this misses, a worker that
   * stops for instance, the garbage pass collects).
   */
  collect(turnId: string): void {
    const work = this.work;
    if (work?.turnId !== turnId) return;
    this.work = null;
    void work.queue.then(async () => {
      for (const key of work.keys)
        await this.deps.blobs.delete(key).catch((err: unknown) => {
          this.log.warn({ err, key }, 'Checkpoint object not deleted; garbage collection will');
        });
    });
  }

  private enqueue(turnId: string, label: string, skipUnchanged: boolean): Promise<CheckpointTaken | null> {
    const work = this.work;
    if (work?.turnId !== turnId)
      throw new BerthError(
        'TURN_NOT_FOUND',
        `Turn ${turnId} of session ${this.fence.sessionId} has no attempt layer here (checkpoint)`,
      );
    const taken = work.queue.then(() => this.takeNow(work, label, skipUnchanged));
    work.queue = taken.catch(() => undefined);
    return taken;
  }

  private async takeNow(work: Work, label: string, skipUnchanged: boolean): Promise<CheckpointTaken | null> {
    const { store, workspaces, clock } = this.deps;
    const startedAt = performance.now();
    // A chain at its bound restarts: this one holds every change over the committed tree.
    const full = work.chain >= this.maxChain;
    const base = full ? { index: new Map<string, string>(), seq: 0, chain: 0 } : work;
    const { captured, freezeMs, pauseMs } = await this.capture(work, base.index).catch((err: unknown) => {
      throw failed(`its capture failed: ${(err as Error).message}`, err);
    });
    let object: WorkspaceObjectRef | null;
    try {
      object = await workspaces.uploadCheckpoint(captured);
    } catch (err) {
      throw failed(`its upload failed: ${(err as Error).message}`, err);
    }
    if (object) work.keys.add(object.key);
    else if (skipUnchanged) return null;
    failpoint('checkpoint-after-upload');
    const recorded = await store
      .recordCheckpoint(
        {
          ...this.fence,
          turnId: work.turnId,
          messageId: work.messageId,
          baseSeq: base.seq,
          count: work.count + 1,
          label,
          key: object?.key ?? '',
          size: object?.size ?? 0,
        },
        clock.now(),
      )
      .catch((err: unknown) => {
        throw failed(`its record failed: ${(err as Error).message}`, err);
      });
    if (recorded.code !== 'ok') throw fenceError(recorded.code, this.fence, 'recordCheckpoint');
    failpoint('checkpoint-after-record');
    work.index = captured.index;
    work.seq = recorded.value.seq;
    work.count += 1;
    work.chain = base.chain + 1;
    const ms = roundMs(performance.now() - startedAt);
    const bytes = object?.size ?? 0;
    this.log.info(
      {
        turnId: work.turnId,
        seq: work.seq,
        count: work.count,
        full,
        label,
        steps: captured.steps,
        bytes,
        ms,
        freezeMs: roundMs(freezeMs),
        pauseMs: roundMs(pauseMs),
      },
      'Checkpoint recorded',
    );
    return { seq: work.seq, count: work.count, label, bytes, ms };
  }

  /**
   * The attempt layer's changes over `before`, scanned and packed with the sandbox frozen, so
   * a process of the turn that writes on meanwhile cannot tear a file of it; thawed before
   * the upload, so the sandbox never stands still through a network wait.
   */
  private capture(work: Work, before: CheckpointIndex) {
    const { runtime, workspaces } = this.deps;
    return whileFrozen(runtime, { id: '', name: this.sandboxName }, async () => {
      const captured = await workspaces.captureCheckpoint(
        this.fence.sessionId,
        work.turnId,
        this.sandboxName,
        before,
      );
      failpoint('checkpoint-frozen', { merged: workspaces.slotPath(this.sandboxName) });
      return captured;
    }).then(({ value, ...timings }) => ({ captured: value, ...timings }));
  }
}

export function roundMs(ms: number): number;
export function roundMs(ms: number | null): number | null;
export function roundMs(ms: number | null): number | null {
  return ms === null ? null : Math.round(ms * 100) / 100;
}

/**
 * The newest checkpoint and its bases back to the committed tree, oldest first; null when
 * there is none, or a base is missing (rows are never deleted one by one, so only a bug).
 */
function chainOf(rows: TurnCheckpoint[]): TurnCheckpoint[] | null {
  const bySeq = new Map(rows.map((r) => [r.seq, r]));
  const chain: TurnCheckpoint[] = [];
  for (let at = rows.at(-1); at; at = at.baseSeq === 0 ? undefined : bySeq.get(at.baseSeq)) {
    chain.unshift(at);
    if (at.baseSeq !== 0 && !bySeq.has(at.baseSeq)) return null;
  }
  return chain.length > 0 ? chain : null;
}

function failed(why: string, cause: unknown): BerthError {
  if (isBerthError(cause, 'STALE_GENERATION')) return cause;
  return new BerthError('CHECKPOINT_FAILED', `Checkpoint not made: ${why}`, { cause });
}
