/**
 * Workspace chains: a session's committed workspace as immutable objects in the blob store,
 * the newest snapshot and the layers after it. A commit appends its layer (turns.ts, in the
 * commit's own transaction); a snapshot compacts the chain; a fork starts a new session on
 * the same objects. The objects are never copied: rows name them, and garbage collection
 * keeps every object some row still names.
 */
import { BerthError, type ChainEntry, type SessionView, type WorkspaceChain } from '../../../core/index.js';
import { all, get, type Program, type Row, run } from '../program.js';
import { sessionViewOf } from '../session-views.js';
import { ownedBy } from './agents.js';

export function* workspaceChain(sessionId: string): Program<WorkspaceChain> {
  const session = yield* get('SESSION_BY_ID', { id: sessionId });
  if (!session)
    throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist (getWorkspaceChain)`);
  const entries = (yield* all('WORKSPACE_CHAIN', { sessionId })).map(toChainEntry);
  return { sessionId, version: Number(session.workspace_version), entries };
}

/** A commit's layer, appended under the commit's fence (the caller checked the base version). */
export function* appendLayer(
  sessionId: string,
  layer: { version: number; key: string; size: number; turnId: string },
  now: number,
): Program<void> {
  yield* run('INSERT_WORKSPACE_OBJECT', {
    sessionId,
    version: layer.version,
    kind: 'layer',
    blobKey: layer.key,
    size: layer.size,
    turnId: layer.turnId,
    now,
  });
}

export function* recordSnapshot(
  input: { sessionId: string; version: number; key: string; size: number },
  now: number,
): Program<boolean> {
  const session = yield* get('SESSION_BY_ID', { id: input.sessionId });
  if (!session || input.version > Number(session.workspace_version) || input.version < 1) return false;
  const chain = (yield* all('WORKSPACE_CHAIN', { sessionId: input.sessionId })).map(toChainEntry);
  const newest = chain.find((e) => e.kind === 'snapshot');
  if (newest && newest.version >= input.version) return false;
  const inserted = yield* run('INSERT_WORKSPACE_OBJECT', {
    sessionId: input.sessionId,
    version: input.version,
    kind: 'snapshot',
    blobKey: input.key,
    size: input.size,
    turnId: null,
    now,
  });
  if (inserted !== 1) return false;
  yield* run('DROP_SUPERSEDED_OBJECTS', { sessionId: input.sessionId, version: input.version });
  return true;
}

export function* isObjectNamed(key: string): Program<boolean> {
  return (yield* get('WORKSPACE_OBJECT_NAMED', { blobKey: key })) !== undefined;
}

/**
 * The fork: a session of the source's agent and tenant, at the source's workspace version,
 * with its chain's rows and its committed state; its own messages, turns and lease.
 */
export function* forkSession(
  input: { sourceId: string; sessionId: string; now: number; tenant?: string },
  leaseMs: number,
): Program<SessionView> {
  const { sourceId, sessionId, now } = input;
  const source = yield* get('SESSION_BY_ID', { id: sourceId });
  if (!source || !ownedBy(source, input.tenant))
    throw new BerthError('SESSION_NOT_FOUND', `Session ${sourceId} does not exist (forkSession)`);
  if (source.archived_at !== null && source.archived_at !== undefined)
    throw new BerthError('SESSION_ARCHIVED', `Session ${sourceId} is archived (forkSession)`);
  if (
    (yield* run('INSERT_SESSION', { id: sessionId, agent: source.agent, tenant: source.tenant, now })) !== 1
  )
    throw new BerthError('SESSION_EXISTS', `Session ${sessionId} already exists (forkSession)`);
  yield* run('SET_WORKSPACE_VERSION', { id: sessionId, version: Number(source.workspace_version), now });
  for (const entry of (yield* all('WORKSPACE_CHAIN', { sessionId: sourceId })).map(toChainEntry))
    yield* run('INSERT_WORKSPACE_OBJECT', {
      sessionId,
      version: entry.version,
      kind: entry.kind,
      blobKey: entry.key,
      size: entry.size,
      turnId: entry.turnId,
      now,
    });
  yield* run('COPY_STATE', { from: sourceId, to: sessionId, now });
  return (yield* sessionViewOf(sessionId, now, leaseMs))!;
}

function toChainEntry(r: Row): ChainEntry {
  return {
    version: Number(r.version),
    kind: r.kind as ChainEntry['kind'],
    key: String(r.blob_key),
    size: Number(r.size),
    turnId: (r.turn_id as string | null) ?? null,
  };
}
