/**
 * Mediated storage: an agent's grants (written by the API) and its objects (written by
 * its sessions' sandboxes, fenced). The row is the truth: a blob no row names is garbage.
 */
import type { PageRequest, StorageGrant, StorageOp, StoredObject } from '../../../core/index.js';
import { BerthError, BY_PREFIX } from '../../../core/index.js';
import type { Fence, Fenced } from '../../store.js';
import { pageParams } from '../keyset.js';
import { all, get, type Program, run } from '../program.js';
import { toStorageGrant, toStorageObject } from '../rows.js';
import { ownAgentRow } from './agents.js';
import { checkFence } from './fence.js';

export function* grantStorage(
  grant: { agent: string; prefix: string; ops: StorageOp[] },
  now: number,
  tenant: string | undefined,
): Program<StorageGrant> {
  yield* ownAgentRow(grant.agent, tenant, 'grantStorage');
  yield* run('UPSERT_STORAGE_GRANT', { ...grant, ops: grant.ops.join(','), now });
  return toStorageGrant((yield* get('STORAGE_GRANT', grant))!);
}

export function* listStorageGrants(
  agent: string,
  tenant: string | undefined,
  page?: PageRequest,
): Program<StorageGrant[]> {
  yield* ownAgentRow(agent, tenant, 'listStorageGrants');
  return (yield* all('STORAGE_GRANTS_OF_AGENT', { agent, ...pageParams(BY_PREFIX, page) })).map(
    toStorageGrant,
  );
}

export function* revokeStorageGrant(
  agent: string,
  prefix: string,
  tenant: string | undefined,
): Program<void> {
  yield* ownAgentRow(agent, tenant, 'revokeStorageGrant');
  if ((yield* run('DELETE_STORAGE_GRANT', { agent, prefix })) !== 1)
    throw new BerthError(
      'GRANT_NOT_FOUND',
      `Agent ${agent} has no storage grant for prefix ${JSON.stringify(prefix)} (revokeStorageGrant)`,
    );
}

export function* putStorageObject(
  input: Fence & { key: string; sha256: string; size: number; blob: string },
  now: number,
): Program<Fenced<StoredObject>> {
  const code = yield* checkFence(input);
  if (code !== 'ok') return { code };
  const agent = yield* agentOfSession(input.sessionId);
  const { key, sha256, size, blob, sessionId, generation } = input;
  yield* run('UPSERT_STORAGE_OBJECT', { agent, key, sha256, size, blob, sessionId, generation, now });
  return { code: 'ok', value: { key, sha256, size, blob, updatedAt: now } };
}

export function* deleteStorageObject(input: Fence & { key: string }): Program<Fenced<boolean>> {
  const code = yield* checkFence(input);
  if (code !== 'ok') return { code };
  const agent = yield* agentOfSession(input.sessionId);
  return { code: 'ok', value: (yield* run('DELETE_STORAGE_OBJECT', { agent, key: input.key })) === 1 };
}

export function* getStorageObject(agent: string, key: string): Program<StoredObject | null> {
  const row = yield* get('STORAGE_OBJECT', { agent, key });
  return row ? toStorageObject(row) : null;
}

export function* listStorageObjects(
  agent: string,
  page: { prefix: string; after: string; limit: number },
): Program<StoredObject[]> {
  return (yield* all('STORAGE_OBJECTS_PAGE', { agent, ...page })).map(toStorageObject);
}

export function* isStorageBlobNamed(blob: string): Program<boolean> {
  return (yield* get('STORAGE_BLOB_NAMED', { blob })) !== undefined;
}

/** The agent whose namespace a session's storage calls reach: the session's own, read inside the transaction. */
function* agentOfSession(sessionId: string): Program<string> {
  return String((yield* get('SESSION_BY_ID', { id: sessionId }))!.agent);
}
