/**
 * API tokens: stored by the hash of their secret, never the secret; revoked ones authenticate
 * nothing. A tenant's token may set its weight in the fair share, in the same transaction.
 */
import {
  type ApiTokenRow,
  BY_TOKEN_CREATION,
  type PageRequest,
  type Principal,
} from '../../../core/index.js';
import type { NewApiToken } from '../../store.js';
import { pageParams } from '../keyset.js';
import { all, get, type Program, run } from '../program.js';
import { toApiToken } from '../rows.js';

export function* insertApiToken(token: NewApiToken, now: number): Program<ApiTokenRow> {
  const { weight, ...row } = token;
  yield* run('INSERT_API_TOKEN', { ...row, admin: token.tenant === null ? 1 : 0, now });
  if (weight !== undefined && token.tenant !== null)
    yield* run('SET_TENANT_WEIGHT', { tenant: token.tenant, weight });
  return toApiToken((yield* get('API_TOKEN_BY_HASH', { hash: token.hash }))!);
}

export function* principalOfTokenHash(hash: string): Program<Principal | null> {
  const row = yield* get('API_TOKEN_BY_HASH', { hash });
  if (!row) return null;
  const { tokenId, tenant, admin } = toApiToken(row);
  return { tokenId, tenant, admin };
}

export function* listApiTokens(page?: PageRequest): Program<ApiTokenRow[]> {
  return (yield* all('ALL_API_TOKENS', pageParams(BY_TOKEN_CREATION, page))).map(toApiToken);
}

/** false when no live token has this id. */
export function* revokeApiToken(id: string, now: number): Program<boolean> {
  return (yield* run('REVOKE_API_TOKEN', { id, now })) === 1;
}
