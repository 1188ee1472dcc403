/**
 * Sandbox tokens: HMAC-SHA256 over (session, generation, expiry) with the worker's
 * secret. A token names exactly one binding; the gateway refuses any other.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface TokenClaims {
  sessionId: string;
  generation: number;
  expiresAt: number;
}

/** The session id is base64url-encoded: ids may contain '.', the token's separator. */
export function signSandboxToken(secret: Buffer, claims: TokenClaims): string {
  const payload = `${Buffer.from(claims.sessionId).toString('base64url')}.${claims.generation}.${claims.expiresAt}`;
  return `v1.${payload}.${mac(secret, payload)}`;
}

/** The claims of a well-formed, correctly signed, unexpired token; otherwise null. */
export function verifySandboxToken(secret: Buffer, token: string, now: number): TokenClaims | null {
  const parts = token.split('.');
  if (parts.length !== 5 || parts[0] !== 'v1') return null;
  const [, encodedSession, generation, expiresAt, signature] = parts as [
    string,
    string,
    string,
    string,
    string,
  ];
  const expected = Buffer.from(mac(secret, `${encodedSession}.${generation}.${expiresAt}`));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  const sessionId = Buffer.from(encodedSession, 'base64url').toString();
  const claims = { sessionId, generation: Number(generation), expiresAt: Number(expiresAt) };
  return claims.expiresAt > now ? claims : null;
}

function mac(secret: Buffer, payload: string): string {
  return createHmac('sha256', secret).update(payload).digest('base64url');
}
