/**
 * API tokens: a random secret shown once, stored only as its SHA-256 (the secret has 256
 * bits of entropy, so a fast hash is enough and lookups stay one indexed read). The
 * operator's admin token lives in <data>/admin-token (mode 0600), created at the first
 * `berth up`: that file is how the local CLI authenticates, by being able to read it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { type ApiTokenRow, BerthError, hostPaths, newId, type Principal } from '../core/index.js';
import { readAdminToken } from '../secrets/index.js';
import type { ApiStore } from '../store/index.js';

const TOKEN_PREFIX = 'berth_';

export function hashToken(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** Stores a new token's hash (and the tenant's weight, if given; one transaction) and returns the secret, which is never stored. */
export async function issueToken(
  store: ApiStore,
  tenant: string | null,
  label: string,
  now: number,
  weight?: number,
): Promise<{ token: string; row: ApiTokenRow }> {
  const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  const row = await store.insertApiToken(
    { id: newId('tok'), tenant, hash: hashToken(token), label, ...(weight === undefined ? {} : { weight }) },
    now,
  );
  return { token, row };
}

/** The principal of an `Authorization` header; throws API_TOKEN_INVALID for a malformed or unknown token. */
export async function authenticate(store: ApiStore, header: string): Promise<Principal> {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw new BerthError('API_TOKEN_INVALID', 'Authorization header is not "Bearer <token>"');
  const principal = await store.principalOfTokenHash(hashToken(m[1]!));
  if (!principal) throw new BerthError('API_TOKEN_INVALID', 'API token is unknown or revoked');
  return principal;
}

/**
 * The admin token of this data dir: read from <data>/admin-token, or created there (0600,
 * exclusive create so two hosts starting together agree on one) with its hash stored.
 */
export async function ensureAdminToken(store: ApiStore, dataDir: string, now: number): Promise<string> {
  const path = hostPaths(dataDir).adminTokenFile;
  const existing = await readAdminToken(dataDir);
  if (existing !== null) {
    // The file outlived its store (a store reset): register it again.
    if (!(await store.principalOfTokenHash(hashToken(existing)))) {
      await store.insertApiToken(
        { id: newId('tok'), tenant: null, hash: hashToken(existing), label: 'admin' },
        now,
      );
    }
    return existing;
  }
  const { token } = await issueToken(store, null, 'admin', now);
  try {
    await writeFile(path, `${token}\n`, { mode: 0o600, flag: 'wx' });
    return token;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return ensureAdminToken(store, dataDir, now);
  }
}

export function isLoopbackAddress(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/** Listening beyond loopback exposes the API: refuse unless a tenant token exists to use it with. */
export async function assertListenAllowed(store: ApiStore, host: string): Promise<void> {
  if (isLoopbackAddress(host)) return;
  const tokens = await store.listApiTokens();
  if (!tokens.some((t) => !t.admin && t.revokedAt === null)) {
    throw new BerthError(
      'CONFIG_INVALID',
      `Refusing to listen on ${host}: the API would be reachable from other machines and no tenant token exists`,
      {
        hint: 'Create one first on a local host (berth up; berth token create --tenant T), or listen on 127.0.0.1.',
      },
    );
  }
}
