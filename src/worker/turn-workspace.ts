/**
 * The workspace side of a layered mode's turns (an overlay per turn, a sandbox per turn):
 * before a turn, this machine's copy is brought level with the session's chain in the
 * store; at its commit, the sealed layer goes to the blob store first and its key and the
 * version the turn ran on go into the commit, which refuses any other version; after its
 * promotion the copy's stamp moves on, and the chain is compacted into a snapshot when it
 * grew past the config's bounds. A copy that is the only one (a data dir from before
 * chains) is snapshotted as it is found, before any turn changes it.
 *
 * An S3 service that goes away (a restarting daemon, a burst of 503s) costs latency, not a
 * try: bringing the copy level and uploading the sealed layer are tried again with backoff
 * for BLOB_OUTAGE_BUDGET_MS (each try is itself the backend's own retries, about 10 s)
 * before the turn is aborted with the blob store's code. A snapshot that fails is skipped:
 * the chain only stays longer until the next one.
 */
import type { Logger } from 'pino';
import {
  type CommitInput,
  failpoint,
  isBerthError,
  retryUntil,
  type Turn,
  type WorkspaceChain,
  type WorkspaceObjectRef,
} from '../core/index.js';
import type { SandboxDeps } from './deps.js';

/**
 * How long a turn waits for the blob store before its start or its commit fails: a
 * SIGKILLed radosgw answered again within 1 s of its restart here, and AWS S3's 503
 * SlowDown passes in seconds. Kept well inside the runner's 60 s wait for its commit,
 * which also covers the store's own retries.
 */
const BLOB_OUTAGE_BUDGET_MS = 20_000;
const BLOB_OUTAGE_BACKOFF = { firstMs: 500, maxMs: 4000 };

interface CurrentTurn {
  turnId: string;
  chain: WorkspaceChain;
  /** The version the turn's workspace holds: the chain's, checked again by the commit. */
  baseVersion: number;
  /** What its seal uploaded (null: it changed nothing); undefined before the seal. */
  layer?: WorkspaceObjectRef | null;
}

export class TurnWorkspace {
  private current: CurrentTurn | null = null;

  constructor(
    private readonly deps: SandboxDeps,
    private readonly sessionId: string,
    private readonly log: Logger,
  ) {}

  /** Before the turn mounts: its copy holds the store's version (materialised when it did not). */
  async bringCurrent(turn: Turn): Promise<void> {
    const chain = await this.deps.store.getWorkspaceChain(this.sessionId);
    const startedAt = performance.now();
    const ensured = await this.whileBlobsAway('bring the workspace level', () =>
      this.deps.workspaces.ensureCurrent(chain),
    );
    this.deps.cacheBudget.recordEnsured(ensured.how);
    if (ensured.how !== 'current')
      this.log.info(
        { turnId: turn.id, ...ensured, ms: Math.round(performance.now() - startedAt) },
        'Workspace brought level with the store',
      );
    this.current = { turnId: turn.id, chain, baseVersion: ensured.version };
    if (ensured.how === 'adopted') await this.snapshot(ensured.version, 'adopted an older data dir');
  }

  /** At the commit: the sealed layer uploaded, then what the commit must carry. */
  async seal(turnId: string, sandboxName: string): Promise<NonNullable<CommitInput['workspace']>> {
    const current = this.of(turnId);
    await this.deps.workspaces.seal(this.sessionId, turnId, sandboxName);
    failpoint('after-seal');
    current.layer = await this.whileBlobsAway('upload the layer', () =>
      this.deps.workspaces.uploadLayer(this.sessionId, turnId),
    );
    failpoint('after-upload');
    return { baseVersion: current.baseVersion, layer: current.layer };
  }

  /** What the turn's commit made, for its promotion; null when this supervision did not seal it. */
  committedAs(turnId: string): { version: number; layer: WorkspaceObjectRef | null } | null {
    const current = this.current;
    if (current?.turnId !== turnId || current.layer === undefined) return null;
    return { version: current.baseVersion + 1, layer: current.layer };
  }

  /** After the promotion: a snapshot when the chain since the newest one is long enough. */
  async afterPromotion(turnId: string): Promise<void> {
    const commit = this.committedAs(turnId);
    if (!commit) return;
    const { chain } = this.current!;
    // A rewind's snapshot is the objects of an older tree named again: beyond its first, they
    // count like layers, so a chain a rewind made long is compacted as soon as one it grew.
    const layers = chain.entries.filter((e, i) => e.kind === 'layer' || (e.rewoundTo !== undefined && i > 0));
    const count = layers.length + (commit.layer ? 1 : 0);
    const bytes = layers.reduce((sum, e) => sum + e.size, 0) + (commit.layer?.size ?? 0);
    const { snapshotEveryLayers, snapshotEveryBytes } = this.deps.config;
    if (count < snapshotEveryLayers && bytes < snapshotEveryBytes) return;
    await this.snapshot(commit.version, `${count} layers, ${bytes} bytes since the last snapshot`);
  }

  /** The copy's tree, at `version`, as the chain's newest snapshot; skipped while the blob store is away. */
  private async snapshot(version: number, why: string): Promise<void> {
    const startedAt = performance.now();
    const snapshot = await this.deps.workspaces.uploadSnapshot(this.sessionId).catch((err: unknown) => {
      if (!isBlobOutage(err)) throw err;
      this.log.warn({ err, version }, 'Workspace snapshot skipped: the blob store is away');
      return null;
    });
    if (!snapshot || snapshot.version !== version) return;
    const recorded = await this.deps.store.recordWorkspaceSnapshot(
      { sessionId: this.sessionId, version, key: snapshot.key, size: snapshot.size },
      this.deps.clock.now(),
    );
    this.log.info(
      { version, bytes: snapshot.size, why, recorded, ms: Math.round(performance.now() - startedAt) },
      'Workspace chain compacted into a snapshot',
    );
  }

  /** `call`, tried again with backoff while the blob store fails transiently, for at most BLOB_OUTAGE_BUDGET_MS. */
  private async whileBlobsAway<T>(what: string, call: () => Promise<T>): Promise<T> {
    const { clock } = this.deps;
    return retryUntil(call, {
      retryable: isBlobOutage,
      backoff: BLOB_OUTAGE_BACKOFF,
      deadline: clock.now() + BLOB_OUTAGE_BUDGET_MS,
      now: () => clock.now(),
      onRetry: (err, failures, delayMs) =>
        this.log.warn({ err, step: what, failures, delayMs }, 'Blob store away; trying again'),
    });
  }

  private of(turnId: string): CurrentTurn {
    if (this.current?.turnId !== turnId)
      throw new Error(`turn ${turnId} was not brought level with the store before its seal`);
    return this.current;
  }
}

/** The blob store's transient failures (its own retries spent); a missing object or a bad body is not one. */
function isBlobOutage(err: unknown): boolean {
  return isBerthError(err, 'BLOB_WRITE_FAILED') || isBerthError(err, 'BLOB_READ_FAILED');
}
