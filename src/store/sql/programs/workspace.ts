/**
 * Workspace chains: a session's committed workspace as immutable objects in the blob store,
 * the newest snapshot and the layers after it. A commit appends its layer (turns.ts, in the
 * commit's own transaction); a snapshot compacts the chain; a fork starts a new session on
 * the same objects. The objects are never copied: rows name them, and garbage collection
 * keeps every object some row still names.
 */
import {
  BerthError,
  type ChainEntry,
  compactionCut,
  notRetainedError,
  objectsOfVersion,
  type RetentionPolicy,
  type RewindResult,
  retainedVersions,
  retentionFloor,
  type SessionView,
  type WorkspaceChain,
  type WorkspaceObjectRef,
} from '../../../core/index.js';
import { all, get, guarded, type Program, type Row, run, type Tx } from '../program.js';
import { sessionViewOf } from '../session-views.js';
import { insertEvent } from './events.js';
import { sessionGuard } from './guards.js';
import { lockOwnSession } from './take-back.js';

export function* workspaceChain(sessionId: string): Program<WorkspaceChain> {
  const session = yield* get('SESSION_BY_ID', { id: sessionId });
  if (!session)
    throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist (getWorkspaceChain)`);
  return yield* chainWithHistory(sessionId, Number(session.workspace_version));
}

/**
 * A commit's layer (or a resident capture's), appended under the caller's fence (the caller
 * checked the version); false when that version has a layer already.
 */
export function* appendLayer(
  sessionId: string,
  layer: { version: number; key: string; size: number; turnId: string | null },
  now: number,
): Program<boolean> {
  const inserted = yield* run('INSERT_WORKSPACE_OBJECT', {
    sessionId,
    version: layer.version,
    kind: 'layer',
    part: 0,
    rewoundTo: null,
    blobKey: layer.key,
    size: layer.size,
    turnId: layer.turnId,
    now,
  });
  return inserted === 1;
}

export function* recordSnapshot(
  input: { sessionId: string; version: number; key: string; size: number },
  now: number,
): Program<boolean> {
  const session = yield* get('SESSION_BY_ID', { id: input.sessionId });
  if (!session || input.version > Number(session.workspace_version) || input.version < 1) return false;
  const chain = (yield* chainWithHistory(input.sessionId, Number(session.workspace_version))).entries;
  const newest = chain.find((e) => e.kind === 'snapshot');
  if (newest && newest.version >= input.version) return false;
  const inserted = yield* run('INSERT_WORKSPACE_OBJECT', {
    sessionId: input.sessionId,
    version: input.version,
    kind: 'snapshot',
    part: 0,
    rewoundTo: null,
    blobKey: input.key,
    size: input.size,
    turnId: null,
    now,
  });
  if (inserted !== 1) return false;
  // What goes is the agent's retention policy's to say: the rows before the newest snapshot
  // of compaction at or before the oldest version it keeps.
  const agent = yield* get('AGENT_BY_NAME', { name: session.agent });
  const policy = agent
    ? (JSON.parse(String(agent.spec)) as { retention?: RetentionPolicy }).retention
    : undefined;
  const rows = yield* all('WORKSPACE_ROWS', { sessionId: input.sessionId });
  const floor = retentionFloor(policy, {
    snapshotVersion: input.version,
    currentVersion: Number(session.workspace_version),
    rows: rows.map((r) => ({ version: Number(r.version), createdAt: Number(r.created_at) })),
    now,
  });
  const cut = compactionCut(
    rows.map((r) => ({
      version: Number(r.version),
      kind: r.kind as ChainEntry['kind'],
      rewound: r.rewound_to !== null && r.rewound_to !== undefined,
    })),
    floor,
  );
  if (cut !== null) yield* run('DROP_SUPERSEDED_OBJECTS', { sessionId: input.sessionId, version: cut });
  return true;
}

export function* isObjectNamed(key: string): Program<boolean> {
  return (yield* get('WORKSPACE_OBJECT_NAMED', { blobKey: key })) !== undefined;
}

/**
 * The fork: a session of the source's agent and tenant, at one of the source's retained
 * versions (its current one by default), with the rows of every object the source's chain
 * names up to that version (so the fork can read and rewind to them too) and the source's
 * committed state; its own messages, turns and lease. Like a rewind, it holds the source's
 * row and is refused while the source answers messages (SESSION_BUSY), so the state it
 * copies is the one its version's commit left. The rows are written from one read of the
 * source's rows, so a compaction committing meanwhile cannot leave the fork short.
 */
export function* forkSession(
  tx: Tx,
  input: { sourceId: string; sessionId: string; fromVersion?: number; now: number; tenant?: string },
  leaseMs: number,
): Program<SessionView> {
  const { sourceId, sessionId, now } = input;
  const source = yield* lockOwnSession(sourceId, input.tenant, tx.operation);
  if (source.archived_at !== null && source.archived_at !== undefined)
    throw new BerthError('SESSION_ARCHIVED', `Session ${sourceId} is archived (forkSession)`);
  yield* assertIdle(sourceId, tx.operation);
  const chain = yield* chainWithHistory(sourceId, Number(source.workspace_version));
  const version = input.fromVersion ?? chain.version;
  assertRetained(chain, version, 'forkSession');
  if (
    (yield* run('INSERT_SESSION', { id: sessionId, agent: source.agent, tenant: source.tenant, now })) !== 1
  )
    throw new BerthError('SESSION_EXISTS', `Session ${sessionId} already exists (forkSession)`);
  yield* run('SET_WORKSPACE_VERSION', { id: sessionId, version, now });
  yield* insertObjects(
    sessionId,
    chain.history!.filter((e) => e.version <= version),
    now,
  );
  yield* run('COPY_STATE', { from: sourceId, to: sessionId, now });
  return (yield* sessionViewOf(sessionId, now, leaseMs))!;
}

/**
 * The rewind: the session goes back to the tree of `toVersion` as a new version (the
 * current one plus one), whose snapshot names the objects that build that tree (the
 * snapshot at or before it, then its layers): rows only, no byte copied, and no older row
 * dropped, so history is never rewritten and the versions in between stay readable. Under
 * the session's lock, as every transition that changes its messages, and refused while a
 * turn runs or an inbound message is open (SESSION_BUSY): a message accepted after the
 * rewind runs on the rewound tree, one accepted before makes the rewind wait. The version
 * moves by compare-and-set on the one read under the lock; a worker's copy of the
 * workspace is then behind the chain and is materialised before its next turn. The
 * session's state (key-value) is not versioned and stays as it is.
 */
export function* rewindSession(
  tx: Tx,
  input: {
    sessionId: string;
    toVersion: number;
    now: number;
    tenant?: string;
    emptyTree?: WorkspaceObjectRef;
  },
  leaseMs: number,
): Program<RewindResult> {
  const { sessionId, toVersion, now } = input;
  const session = yield* lockOwnSession(sessionId, input.tenant, tx.operation);
  if (session.archived_at !== null && session.archived_at !== undefined)
    throw new BerthError('SESSION_ARCHIVED', `Session ${sessionId} is archived (${tx.operation})`);
  yield* assertIdle(sessionId, tx.operation);
  const current = Number(session.workspace_version);
  const chain = yield* chainWithHistory(sessionId, current);
  const objects = assertRetained(chain, toVersion, tx.operation);
  const parts = objects.length > 0 ? objects : input.emptyTree ? [input.emptyTree] : null;
  if (!parts)
    throw new BerthError(
      'INTERNAL',
      `Version ${toVersion} of session ${sessionId}'s workspace is empty and no empty tree was given (${tx.operation})`,
    );
  const version = current + 1;
  yield* guarded(
    tx,
    'ADVANCE_WORKSPACE_VERSION',
    { id: sessionId, from: current, now },
    sessionGuard(sessionId, `at workspace version ${current}`),
  );
  yield* insertObjects(
    sessionId,
    parts.map((p) => ({
      version,
      kind: 'snapshot' as const,
      key: p.key,
      size: p.size,
      turnId: null,
      rewoundTo: toVersion,
    })),
    now,
  );
  yield* insertEvent(tx, sessionId, 'rewound', { fromVersion: current, toVersion, version }, now);
  return {
    session: (yield* sessionViewOf(sessionId, now, leaseMs))!,
    version,
    toVersion,
    objects: objects.length,
  };
}

/**
 * SESSION_BUSY while the session answers messages: a turn runs, or an inbound message is
 * pending (also one waiting out a retry) or processing. The caller holds the session row.
 */
function* assertIdle(sessionId: string, operation: string): Program<void> {
  const open = (yield* get('SESSION_OPEN_WORK', { sessionId }))!;
  const running = (open.running_turn as string | null) ?? null;
  const openMessages = Number(open.open_messages);
  if (running !== null || openMessages > 0)
    throw new BerthError(
      'SESSION_BUSY',
      `Session ${sessionId} is answering its messages (${operation}). Current state: ${
        running === null ? '' : `turn ${running} running, `
      }${openMessages} inbound message(s) pending or processing`,
    );
}

/** The session's materialising chain, with every row the store still names as its history. */
function* chainWithHistory(sessionId: string, version: number): Program<WorkspaceChain> {
  const history = (yield* all('WORKSPACE_ROWS', { sessionId })).map(toChainEntry);
  const chain: WorkspaceChain = { sessionId, version, entries: [], history };
  let base = 0;
  for (const e of history) if (e.kind === 'snapshot') base = e.version;
  chain.entries = history.filter((e) => e.version > base || (e.kind === 'snapshot' && e.version === base));
  return chain;
}

/** The objects of `version` in `chain`; VERSION_NOT_RETAINED (or INVALID_INPUT for a version not reached). */
function assertRetained(chain: WorkspaceChain, version: number, operation: string): ChainEntry[] {
  if (!Number.isSafeInteger(version) || version < 0 || version > chain.version)
    throw new BerthError(
      'INVALID_INPUT',
      `Session ${chain.sessionId} has reached workspace version ${chain.version}; there is no version ${version} (${operation})`,
    );
  const objects = objectsOfVersion(chain, version);
  if (objects) return objects;
  const retained = retainedVersions(chain)!;
  throw notRetainedError(
    chain.sessionId,
    version,
    retained,
    `it was compacted into the snapshot of version ${retained.oldest}`,
  );
}

/** Rows naming objects for a session; a snapshot's parts numbered in the order given. */
function* insertObjects(sessionId: string, entries: ChainEntry[], now: number): Program<void> {
  const parts = new Map<string, number>();
  for (const entry of entries) {
    const at = `${entry.version}/${entry.kind}`;
    const part = parts.get(at) ?? 0;
    parts.set(at, part + 1);
    yield* run('INSERT_WORKSPACE_OBJECT', {
      sessionId,
      version: entry.version,
      kind: entry.kind,
      part,
      rewoundTo: entry.rewoundTo ?? null,
      blobKey: entry.key,
      size: entry.size,
      turnId: entry.turnId,
      now,
    });
  }
}

function toChainEntry(r: Row): ChainEntry {
  return {
    version: Number(r.version),
    kind: r.kind as ChainEntry['kind'],
    key: String(r.blob_key),
    size: Number(r.size),
    turnId: (r.turn_id as string | null) ?? null,
    ...(r.rewound_to === null || r.rewound_to === undefined ? {} : { rewoundTo: Number(r.rewound_to) }),
  };
}
