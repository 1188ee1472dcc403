/**
 * A resident workspace follows its session: after each resident commit, the files the
 * sandbox writes in place are captured into the session's chain, so another data dir can
 * materialise them when this one is lost (claim-resident-workspace.ts).
 *
 * After the commit, not in it: the reply is not held up by a freeze and an upload, and a
 * blob store that is away costs a capture (skipped, logged), never a turn: the files are
 * still on this data dir, and the next capture holds them. The price is a window (below).
 *
 * Invariants:
 * - Frozen for the scan and pack only (whileFrozen: thawed in every case before the upload
 *   and the record); its processes run on afterwards.
 * - Never half-recorded: the object is whole in the blob store before one fenced store
 *   transaction appends it to the chain at the commit's version and records that version as
 *   captured; a capture the store refuses (the lease or the version moved on) or that
 *   fails anywhere leaves the base where it was, so the next capture is a delta over the
 *   last one *recorded*, and holds what this one missed.
 * - The first capture of a sandbox's life is a full one (the whole tree, as the chain's
 *   snapshot of that version): what an earlier sandbox wrote after its last capture is on
 *   this disk but in no object, so no delta is made over a tree this process did not index.
 * - An empty workspace is not captured fully (a snapshot needs an object): the next capture is full again.
 * - The window: the chain holds the workspace as of the last recorded capture; another data
 *   dir uses it only when its version is the session's (no resident commit after it), else
 *   the session is refused as before. What a move can lose is what was written after that
 *   capture's freeze with no commit after it: processes between turns, an aborted turn.
 */
import type { Logger } from 'pino';
import { failpoint } from '../core/index.js';
import { whileFrozen } from '../runtime/index.js';
import type { Fence } from '../store/index.js';
import type { CheckpointIndex } from '../workspace/index.js';
import type { SandboxDeps } from './deps.js';
import { roundMs } from './turn-checkpoints.js';

export class ResidentCapture {
  /** The workspace as of the last capture this sandbox recorded; null before its first (a full one). */
  private index: CheckpointIndex | null = null;

  constructor(
    private readonly deps: SandboxDeps,
    private readonly fence: Fence,
    private readonly sandboxName: string,
    private readonly log: Logger,
  ) {}

  /** After the commit of `version` by `turnId`: captured and recorded, or skipped and logged. */
  async afterCommit(turnId: string, version: number): Promise<void> {
    failpoint('resident-before-capture');
    await this.take(version, turnId);
  }

  /**
   * Before the sandbox is released alive between turns (a recycle, a drain, a stop): what its
   * processes wrote since the last capture, so a planned move loses nothing. Returns the
   * session's workspace version after it (one more when it had been captured already).
   */
  beforeRelease(version: number): Promise<number> {
    return this.take(version, null);
  }

  private async take(version: number, turnId: string | null): Promise<number> {
    const { runtime, workspaces, store, clock, dataDir } = this.deps;
    const startedAt = performance.now();
    const kind = this.index ? 'layer' : 'snapshot';
    const at = turnId ? 'commit' : 'release';
    try {
      const before = this.index ?? new Map<string, string>();
      const { value: captured, ...frozen } = await whileFrozen(
        runtime,
        { id: '', name: this.sandboxName },
        () => workspaces.captureResident(this.fence.sessionId, before),
      );
      // An empty workspace as a snapshot would be no object, which cannot say "nothing" over older rows.
      if (kind === 'snapshot' && !captured.archive) {
        this.log.info({ turnId, version, at }, 'Resident workspace empty; nothing captured');
        return version;
      }
      const object = await workspaces.uploadCapture(captured, kind);
      const recorded = await store.recordResidentCapture(
        {
          ...this.fence,
          version,
          holder: dataDir.id,
          object: object ? { ...object, kind } : null,
          turnId,
        },
        clock.now(),
      );
      if (recorded.code !== 'ok') {
        this.log.warn({ turnId, version, at, recorded: recorded.code }, 'Resident capture not recorded');
        return version;
      }
      this.index = captured.index;
      this.log.info(
        {
          turnId,
          version: recorded.version,
          at,
          kind,
          steps: captured.steps,
          bytes: object?.size ?? 0,
          ms: roundMs(performance.now() - startedAt),
          freezeMs: roundMs(frozen.freezeMs),
          pauseMs: roundMs(frozen.pauseMs),
        },
        'Resident workspace captured',
      );
      return recorded.version;
    } catch (err) {
      this.log.warn({ err, turnId, version, at }, 'Resident capture skipped; the next one holds its changes');
      return version;
    }
  }
}
