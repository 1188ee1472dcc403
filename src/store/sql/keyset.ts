/**
 * The SQL side of the keyset listings (core/cursor.ts): a page's parameters from its
 * request, and the clause a listing's statement ends with: after the previous page's last
 * key, in key order, at most `limit` rows. Without a page a listing reads every row (the
 * internal callers that need them all), through the same statement.
 */
import { type Keyset, keyAfter, type PageRequest } from '../../core/index.js';

/** A two-part key (time, id): the clause over its time column. Parameters afterAt, afterId, limit. */
export const afterTimeAndId = (time: string) =>
  `(${time}, id) > (:afterAt, :afterId) ORDER BY ${time}, id LIMIT :limit`;

/** A one-part key: the clause over its column, of SQL `type`. Parameters after (null: the first page), limit. */
export const afterKey = (column: string, type: 'TEXT' | 'BIGINT') =>
  `(CAST(:after AS ${type}) IS NULL OR ${column} > :after) ORDER BY ${column} LIMIT :limit`;

/** The parameters of afterTimeAndId (two-part keys) or afterKey (one-part keys) for a page, or for every row. */
export function pageParams(
  keys: Keyset<never>,
  page?: PageRequest,
): { afterAt: number; afterId: string; limit: number } | { after: number | string | null; limit: number } {
  const key = keyAfter(keys, page);
  const limit = page?.limit ?? Number.MAX_SAFE_INTEGER;
  return key.length === 2
    ? { afterAt: Number(key[0]), afterId: String(key[1]), limit }
    : { after: key[0]!, limit };
}
