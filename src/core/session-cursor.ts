/**
 * The cursor of the session listing: where the previous page ended (its last session's
 * creation time and id, the listing's order). Opaque to clients: base64url, so a change
 * of what it holds breaks no one who only passes it back.
 */
import { BerthError } from './errors.js';

export interface SessionCursor {
  createdAt: number;
  id: string;
}

export function encodeSessionCursor(c: SessionCursor): string {
  return Buffer.from(`${c.createdAt}:${c.id}`).toString('base64url');
}

export function decodeSessionCursor(cursor: string): SessionCursor {
  const text = Buffer.from(cursor, 'base64url').toString();
  const colon = text.indexOf(':');
  const createdAt = Number(text.slice(0, colon));
  if (colon < 1 || !Number.isSafeInteger(createdAt) || colon === text.length - 1)
    throw new BerthError(
      'INVALID_INPUT',
      `Cursor ${JSON.stringify(cursor)} is not one this listing gave: pass the "next" of the previous page, or no cursor for the first`,
    );
  return { createdAt, id: text.slice(colon + 1) };
}
