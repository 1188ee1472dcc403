/**
 * Mediated storage: the rules of keys and grants, pure. An agent's objects live
 * in its own namespace; a key is a relative path of safe segments and never reaches a
 * file system path (blobs are content-addressed), so the rules below are defence in depth
 * and a clear error for the caller. A grant gives one agent some operations on the keys
 * under one folder prefix; no grant = nothing allowed.
 */
import { z } from 'zod';
import { BerthError } from './errors.js';
import type { StorageEntry, StorageListing } from './protocol.js';

export const STORAGE_OPS = ['read', 'list', 'write', 'delete'] as const;
export type StorageOp = (typeof STORAGE_OPS)[number];
export const MAX_STORAGE_KEY_BYTES = 1024;
export const MAX_STORAGE_SEGMENT_BYTES = 255;

export interface StorageGrant {
  agent: string;
  /** '' (every key) or a folder: segments ending in '/'. */
  prefix: string;
  ops: StorageOp[];
  createdAt: number;
}

/** An object as agents see it (the wire type): key, hex SHA-256 of the content, size, update time. */
export type StorageObject = StorageEntry;

/** An object as the store records it: `blob` names the file holding its content (host side only). */
export interface StoredObject extends StorageObject {
  blob: string;
}

/** What agents and the API see of an object: the blob stays on the host. */
export function storageEntryOf(o: StoredObject): StorageEntry {
  return { key: o.key, sha256: o.sha256, size: o.size, updatedAt: o.updatedAt };
}

/** A page from up to `limit + 1` rows read in key order: the extra row only says there is a next page. */
export function storageListingOf(rows: StoredObject[], limit: number): StorageListing {
  const objects = rows.slice(0, limit).map(storageEntryOf);
  return { objects, next: rows.length > limit ? objects[objects.length - 1]!.key : null };
}

/** The rule `key` breaks, or null when it is a valid key. */
export function storageKeyProblem(key: string): string | null {
  if (key === '') return 'is empty';
  if (Buffer.byteLength(key) > MAX_STORAGE_KEY_BYTES) return `is longer than ${MAX_STORAGE_KEY_BYTES} bytes`;
  if (key.startsWith('/')) return 'is absolute (starts with "/"); keys are relative paths';
  if (key.includes('\\')) return 'contains a backslash; separate segments with "/"';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\u0000-\u001f\u007f]/.test(key)) return 'contains a NUL or control character';
  for (const segment of key.split('/')) {
    if (segment === '') return 'has an empty segment ("//" or a trailing "/")';
    if (segment === '.' || segment === '..') return `has a "${segment}" segment`;
    if (Buffer.byteLength(segment) > MAX_STORAGE_SEGMENT_BYTES)
      return `has a segment longer than ${MAX_STORAGE_SEGMENT_BYTES} bytes`;
  }
  return null;
}

/** The key, or INVALID_INPUT naming the rule it breaks. */
export function assertStorageKey(key: string): string {
  const problem = storageKeyProblem(key);
  if (problem)
    throw new BerthError('INVALID_INPUT', `Storage key ${JSON.stringify(key.slice(0, 80))} ${problem}`, {
      hint: 'A key is a relative path of segments separated by "/": no empty, "." or ".." segment, no backslash or control character, at most 1024 bytes.',
    });
  return key;
}

/** The rule a grant prefix breaks, or null: '' or valid key segments followed by '/'. */
export function grantPrefixProblem(prefix: string): string | null {
  if (prefix === '') return null;
  if (!prefix.endsWith('/'))
    return 'must end with "/" (a grant covers a folder: use "photos/", not "photos")';
  const problem = storageKeyProblem(prefix.slice(0, -1));
  return problem ? `before its final "/" ${problem}` : null;
}

export const storageGrantInputSchema = z
  .object({
    /** '' = every key of the agent. */
    prefix: z
      .string()
      .max(MAX_STORAGE_KEY_BYTES)
      .superRefine((prefix, ctx) => {
        const problem = grantPrefixProblem(prefix);
        if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
      }),
    ops: z
      .array(z.enum(STORAGE_OPS))
      .min(1, `give at least one of ${STORAGE_OPS.join(', ')}`)
      .transform((ops) => STORAGE_OPS.filter((op) => ops.includes(op))),
  })
  .strict();
export type StorageGrantInput = z.output<typeof storageGrantInputSchema>;
export type StorageGrantBody = z.input<typeof storageGrantInputSchema>;

export type StorageAccess = { action: 'allow'; prefix: string } | { action: 'deny'; reason: string };

/**
 * Whether `op` on `target` is granted. For read, write and delete the target is a key;
 * for list it is the listing's prefix, which must lie inside a granted folder (so the
 * listing shows nothing outside it).
 */
export function decideStorageAccess(grants: StorageGrant[], op: StorageOp, target: string): StorageAccess {
  const covering = grants.find((g) => g.ops.includes(op) && target.startsWith(g.prefix));
  if (covering) return { action: 'allow', prefix: covering.prefix };
  const granted = grants.filter((g) => g.ops.includes(op)).map((g) => JSON.stringify(g.prefix));
  const what = op === 'list' ? `listing prefix ${JSON.stringify(target)}` : `key ${JSON.stringify(target)}`;
  return {
    action: 'deny',
    reason:
      granted.length === 0
        ? `no grant allows ${op}`
        : `${what} is outside the prefixes granted for ${op} (${granted.join(', ')})`,
  };
}
