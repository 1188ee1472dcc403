/**
 * A session's history as the API shows it: what one turn was (its attempts, messages,
 * replies, state, timing and faults), what it changed in the workspace (its diff), and
 * the workspace of any retained version. The shapes the API answers and the SDK returns,
 * and the pure rules that make them from store records. No I/O.
 */
import { BerthError, ERRORS } from './errors.js';
import type { ChainEntry, Message, SessionView, Turn, TurnRecord, WorkspaceChain } from './types.js';

/** GET /v1/sessions/:id/workspace: what a session's workspace history keeps and costs. */
export interface WorkspaceSummary {
  sessionId: string;
  /** The current workspace version. */
  version: number;
  /** The versions history, rewind and fork reach; null for a resident agent (no chain). */
  retained: RetainedVersions | null;
  /** The agent's retention policy; null = the default (the versions since the newest snapshot). */
  retention: RetentionPolicy | null;
  /** Objects the session's chain names in the blob store, and their bytes, each object once (shared with forks, named again by rewinds). */
  objects: number;
  bytes: number;
  /** The retained versions a rewind made (they have no turn), each with the version whose tree it holds. */
  rewinds: { version: number; toVersion: number }[];
}

/** The rewinds among the chain's retained versions, oldest first. */
export function rewindsOf(chain: WorkspaceChain): { version: number; toVersion: number }[] {
  const seen = new Map<number, number>();
  for (const e of chain.history ?? chain.entries)
    if (e.rewoundTo !== undefined) seen.set(e.version, e.rewoundTo);
  return [...seen].map(([version, toVersion]) => ({ version, toVersion }));
}

/** POST /v1/sessions/:id/rewind */
export interface RewindResult {
  session: SessionView;
  /** The version the rewind made (the one before it, plus one). */
  version: number;
  /** The version whose tree it holds. */
  toVersion: number;
  /** The objects its snapshot names (none copied). */
  objects: number;
}

/** The versions whose tree can be read: oldest..newest, both included. */
export interface RetainedVersions {
  oldest: number;
  newest: number;
}

export type TreeEntryType = 'dir' | 'file' | 'link';

/** One entry of a listed directory. */
export interface TreeEntryInfo {
  name: string;
  type: TreeEntryType;
  /** Bytes of a file; 0 for a directory or a link. */
  size: number;
  /** Permission bits, e.g. 0o644. */
  mode: number;
  /** A link's target. */
  target?: string;
  /** File modification time, epoch ms. */
  mtimeMs?: number;
}

export type WorkspacePathInfo =
  | { type: 'dir'; path: string; version: number; entries: TreeEntryInfo[] }
  | { type: 'link'; path: string; version: number; target: string }
  | { type: 'file'; path: string; version: number; size: number; mode: number; mtimeMs: number };

/** One side of a changed file. */
export interface FileSide {
  type: 'file' | 'link';
  size: number;
  mode: number;
  /** Hex SHA-256 of a file's content. */
  sha256?: string;
  target?: string;
}

export interface FileChange {
  path: string;
  change: 'added' | 'modified' | 'deleted' | 'renamed';
  /** A renamed file's old path. */
  from?: string;
  before: FileSide | null;
  after: FileSide | null;
  /** Content that is not UTF-8 text (or holds NUL bytes): sizes only. */
  binary: boolean;
  /** Unified diff hunks (`@@ … @@` and the lines), text files only; '' when only the mode changed. */
  diff?: string;
  /** The text diff was left out: a side is over maxTextFileBytes, or the commit's diffs passed maxPatchBytes. */
  truncated?: boolean;
}

export interface TurnDiff {
  /** The version the commit made; it ran on `version - 1`. */
  version: number;
  files: FileChange[];
  /** Some file's text diff was left out (see each file's `truncated`). */
  truncated: boolean;
  counts: Record<FileChange['change'], number>;
}

/** One attempt of a turn that ended early, and why. */
export interface TurnFault {
  turnId: string;
  attempt: number;
  code: string | null;
  error: string | null;
  /** Whether the catalogue calls the code retryable (a later try may succeed). */
  retryable: boolean | null;
  /** When the attempt ended, epoch ms. */
  at: number | null;
  workerId: string;
  sandbox: string | null;
}

/** GET /v1/sessions/:id/turns/:turn */
export interface TurnDetail {
  turn: Turn;
  /** The workspace version this turn's commit made; null unless it committed. */
  version: number | null;
  attempts: Turn[];
  messages: Message[];
  replies: Message[];
  /** The state keys whose committed value this turn wrote and that still hold it. */
  state: Record<string, unknown>;
  timing: {
    /** When its first message was accepted. */
    queuedAt: number | null;
    /** When its first attempt started. */
    firstStartedAt: number;
    startedAt: number;
    endedAt: number | null;
    /** From the first message accepted to the first attempt's start. */
    waitedMs: number | null;
    /** This attempt's own run. */
    runMs: number | null;
    /** From the first message accepted to this attempt's end. */
    totalMs: number | null;
  };
  /** The attempts that were aborted, oldest first. */
  faults: TurnFault[];
}

/** The version a committed turn made: the one it ran on, plus one. */
export function versionOfTurn(turn: Turn): number | null {
  return turn.status === 'committed' && turn.baseVersion !== null ? turn.baseVersion + 1 : null;
}

export function turnDetailOf(record: TurnRecord): TurnDetail {
  const { turn, attempts } = record;
  const firstStartedAt = Math.min(turn.startedAt, ...attempts.map((t) => t.startedAt));
  const queuedAt = record.messages.length ? Math.min(...record.messages.map((m) => m.createdAt)) : null;
  return {
    ...record,
    version: versionOfTurn(turn),
    timing: {
      queuedAt,
      firstStartedAt,
      startedAt: turn.startedAt,
      endedAt: turn.endedAt,
      waitedMs: queuedAt === null ? null : firstStartedAt - queuedAt,
      runMs: turn.endedAt === null ? null : turn.endedAt - turn.startedAt,
      totalMs: turn.endedAt === null || queuedAt === null ? null : turn.endedAt - queuedAt,
    },
    faults: attempts
      .filter((t) => t.status === 'aborted')
      .map((t) => ({
        turnId: t.id,
        attempt: t.attempt,
        code: t.errorCode,
        error: t.error,
        retryable: t.errorCode && t.errorCode in ERRORS ? ERRORS[t.errorCode].retryable : null,
        at: t.endedAt,
        workerId: t.workerId,
        sandbox: t.sandbox,
      })),
  };
}

/**
 * The versions whose tree the chain can still give; null when none (a resident agent's
 * workspace is written in place, with no chain). Compaction drops only the rows before one
 * of its snapshots (a rewind's drops nothing), so every version from the oldest row, when
 * it is such a snapshot (otherwise from 0), to the current one can be built.
 */
export function retainedVersions(chain: WorkspaceChain, resident = false): RetainedVersions | null {
  if (resident) return null;
  // Compaction cuts only at one of its snapshots, which is then the oldest row; with no cut
  // yet (or a policy that keeps all), the rows reach back to the first version.
  const first = (chain.history ?? chain.entries)[0];
  const cut = first?.kind === 'snapshot' && first.rewoundTo === undefined;
  return { oldest: cut ? first.version : 0, newest: chain.version };
}

/**
 * The objects that build the tree of `version`, in the order they apply: the newest snapshot
 * at or before it (all its parts), then the layers after that snapshot up to the version.
 * Empty for an empty tree; null when the version is not retained (or not reached).
 */
export function objectsOfVersion(chain: WorkspaceChain, version: number): ChainEntry[] | null {
  const retained = retainedVersions(chain);
  if (!retained || version < retained.oldest || version > retained.newest) return null;
  const rows = chain.history ?? chain.entries;
  let base = 0;
  for (const e of rows) if (e.kind === 'snapshot' && e.version <= version) base = e.version;
  return rows.filter(
    (e) =>
      (e.kind === 'snapshot' && e.version === base) ||
      (e.kind === 'layer' && e.version > base && e.version <= version),
  );
}

/** VERSION_NOT_RETAINED for `version`, naming why and the versions still available. */
export function notRetainedError(
  sessionId: string,
  version: number,
  retained: RetainedVersions,
  why: string,
): BerthError {
  const available =
    retained.oldest === retained.newest
      ? `only version ${retained.newest} is`
      : `versions ${retained.oldest}-${retained.newest} are`;
  return new BerthError(
    'VERSION_NOT_RETAINED',
    `Version ${version} of session ${sessionId}'s workspace is no longer retained (${why}); ${available} available`,
  );
}

/** An agent's retention policy (agent spec `retention`); undefined = the default. */
export type RetentionPolicy = { versions?: number; days?: number; all?: true } | undefined;

const DAY_MS = 24 * 3_600_000;

/**
 * The oldest version a session must still be able to build once compaction records a
 * snapshot of `snapshotVersion` at `now`, under its agent's policy:
 * - default (none): the snapshot's own version (everything before it goes);
 * - `all`: 0 (nothing goes);
 * - `versions: K`: the last K versions, the current one included;
 * - `days: N`: the oldest version whose objects were recorded in the last N days (none: the snapshot's).
 * Compaction runs only when layers pile up, so between two compactions more is kept, never less.
 */
export function retentionFloor(
  policy: RetentionPolicy,
  input: {
    snapshotVersion: number;
    currentVersion: number;
    rows: { version: number; createdAt: number }[];
    now: number;
  },
): number {
  if (!policy) return input.snapshotVersion;
  if (policy.all) return 0;
  if (policy.versions !== undefined) return Math.max(0, input.currentVersion - policy.versions + 1);
  if (policy.days !== undefined) {
    const cutoff = input.now - policy.days * DAY_MS;
    const recent = input.rows.filter((r) => r.createdAt >= cutoff).map((r) => r.version);
    return recent.length ? Math.min(...recent) : input.snapshotVersion;
  }
  return input.snapshotVersion;
}

/**
 * Where compaction may cut a chain so that `floor` stays buildable: the newest snapshot of
 * compaction (not a rewind's: the rows before a rewind's snapshot are versions history
 * still reads) at or before the floor; every row before it can go. null: nothing can go.
 */
export function compactionCut(
  rows: { version: number; kind: ChainEntry['kind']; rewound: boolean }[],
  floor: number,
): number | null {
  let cut: number | null = null;
  for (const r of rows)
    if (r.kind === 'snapshot' && !r.rewound && r.version <= floor) cut = Math.max(cut ?? 0, r.version);
  return cut;
}

/** Bytes the chain's objects take in the blob store, each object once (a rewind names objects again, a fork shares them). */
export function chainBytes(chain: WorkspaceChain): { objects: number; bytes: number } {
  const sizes = new Map<string, number>();
  for (const e of chain.history ?? chain.entries) sizes.set(e.key, e.size);
  let bytes = 0;
  for (const size of sizes.values()) bytes += size;
  return { objects: sizes.size, bytes };
}
