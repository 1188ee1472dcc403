/**
 * Cursors of the keyset-paginated listings: where the previous page ended, as the key of
 * its last item in the listing's order (a unique key, so a page never repeats or skips a
 * row that stayed). Opaque to clients: base64url of the key's parts joined by ':', only
 * the last of which may be text (it may hold ':'), so a change of what a cursor holds
 * breaks no one who only passes `next` back. A cursor this listing did not give is
 * INVALID_INPUT naming the fix.
 */
import { BerthError } from './errors.js';
import type { PageRequest } from './types.js';

/** A key's parts: integers, then at most one text part, last. */
type Part = 'int' | 'text';
type KeyOf<S extends readonly Part[]> = { [I in keyof S]: S[I] extends 'int' ? number : string };

export interface Keyset<T, S extends readonly Part[] = readonly Part[]> {
  readonly shape: S;
  /** The key of the first page, before every item: null for a one-part key (its column may hold any value). */
  readonly first: KeyOf<S> | readonly [null];
  /** The cursor of the page after `item`. */
  cursorOf(item: T): string;
  /** The key a cursor holds; INVALID_INPUT when it is not one this listing gave. */
  decode(cursor: string): KeyOf<S>;
}

/** `int:…:int`, then `:text` when the key ends with one (after a ':' even alone, so an empty text still makes a cursor). */
function encode(shape: readonly Part[], parts: readonly (number | string)[]): string {
  const hasText = shape.at(-1) === 'text';
  const ints = (hasText ? parts.slice(0, -1) : parts).join(':');
  return Buffer.from(hasText ? `${ints}:${parts.at(-1)}` : ints).toString('base64url');
}

function keyset<T, S extends readonly Part[]>(
  shape: S,
  first: KeyOf<S> | readonly [null],
  keyOf: (item: T) => KeyOf<S>,
): Keyset<T, S> {
  const hasText = shape.at(-1) === 'text';
  const nInts = shape.length - (hasText ? 1 : 0);
  return {
    shape,
    first,
    cursorOf: (item) => encode(shape, keyOf(item)),
    decode(cursor) {
      const fields = Buffer.from(cursor, 'base64url').toString().split(':');
      const ints = fields.slice(0, nInts).map((n) => (/^-?\d+$/.test(n) ? Number(n) : Number.NaN));
      const parts = hasText ? [...ints, fields.slice(Math.max(nInts, 1)).join(':')] : ints;
      // Only a cursor encode made says back exactly what it decodes to (not bad base64url,
      // a missing part, an integer out of range or junk).
      if (fields.length < shape.length || encode(shape, parts) !== cursor)
        throw new BerthError(
          'INVALID_INPUT',
          `Cursor ${JSON.stringify(cursor)} is not one this listing gave: pass the "next" of the previous page, or no cursor for the first`,
        );
      return parts as unknown as KeyOf<S>;
    },
  };
}

const TIME_AND_ID = ['int', 'text'] as const;

/** Sessions, schedules, webhooks, channels: creation order, ties by id. */
export const BY_CREATION = keyset<{ createdAt: number; id: string }, typeof TIME_AND_ID>(
  TIME_AND_ID,
  [-1, ''],
  (x) => [x.createdAt, x.id],
);
/** API tokens: creation order, ties by id. */
export const BY_TOKEN_CREATION = keyset<{ createdAt: number; tokenId: string }, typeof TIME_AND_ID>(
  TIME_AND_ID,
  [-1, ''],
  (x) => [x.createdAt, x.tokenId],
);
/** A session's turns: start order, ties by id. */
export const BY_START = keyset<{ startedAt: number; id: string }, typeof TIME_AND_ID>(
  TIME_AND_ID,
  [-1, ''],
  (x) => [x.startedAt, x.id],
);
/** Agents: by name. */
export const BY_NAME = keyset<{ name: string }, readonly ['text']>(['text'], [null], (x) => [x.name]);
/** An agent's storage grants: by prefix. */
export const BY_PREFIX = keyset<{ prefix: string }, readonly ['text']>(['text'], [null], (x) => [x.prefix]);
/** A channel's sends: by id (their order). */
export const BY_SEQ = keyset<{ id: number }, readonly ['int']>(['int'], [null], (x) => [x.id]);

/**
 * The claim queue: a queued session's key in the fair share (null: its tenant has no share,
 * after every other; -1 in the cursor) and its first pending message (unique), the tie-break.
 */
export const BY_CLAIM = keyset<{ fairKey: number | null; firstId: number }, readonly ['int', 'int']>(
  ['int', 'int'],
  [-1, 0],
  (x) => [x.fairKey ?? -1, x.firstId],
);

/** The key a page request starts after (the listing's first key without a cursor). */
export function keyAfter<S extends readonly Part[]>(
  keys: Keyset<never, S>,
  page?: PageRequest,
): KeyOf<S> | readonly [null] {
  return page?.after === undefined ? keys.first : keys.decode(page.after);
}

/** A page's `next`: the cursor after its last item, or null when it was not full (the last page). */
export function nextCursor<T>(items: readonly T[], limit: number, keys: Keyset<T>): string | null {
  const last = items.at(-1);
  return last !== undefined && items.length === limit ? keys.cursorOf(last) : null;
}
