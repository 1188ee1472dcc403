/**
 * Extra read-only data mounts of an agent, checked against the host's mount allowlist.
 * The allowlist is a file outside any repository, owned by whoever runs
 * the host (default ~/.config/berth/mount-allowlist.json, BERTH_MOUNT_ALLOWLIST):
 *
 *   { "allowedRoots": [{ "path": "/srv/datasets", "description": "…" }],
 *     "blockedPatterns": ["…"] }              // added to DEFAULT_BLOCKED_PATTERNS
 *
 * Invariants: no allowlist file = no extra mounts; a host path is realpath'd (symlinks
 * resolved) before it is compared with the realpath'd roots, so a symlink cannot lead out
 * of a root; no component of the resolved path may contain a blocked pattern; the check
 * runs when the agent is created and again when each sandbox starts (a symlink swapped in
 * between is caught), and the sandbox mounts the resolved path, read-only. Mounts are
 * never writable: a writable host directory shared by sandboxes would escape the
 * transactional workspace (no fencing, no rollback).
 */
import { readFile, realpath, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { isAbsolute, join, sep } from 'node:path';
import { z } from 'zod';
import { type AgentMount, BerthError, MOUNTS_ROOT } from '../core/index.js';

export const DEFAULT_BLOCKED_PATTERNS = [
  '.ssh',
  '.gnupg',
  '.aws',
  '.azure',
  '.gcloud',
  '.kube',
  '.docker',
  '.env',
  '.netrc',
  '.npmrc',
  '.pypirc',
  'id_rsa',
  'id_ed25519',
  'private_key',
  'credentials',
] as const;

const allowlistSchema = z
  .object({
    allowedRoots: z.array(z.object({ path: z.string().min(1), description: z.string().optional() }).strict()),
    blockedPatterns: z.array(z.string().min(1)).default([]),
  })
  .strict();

export interface MountAllowlist {
  /** Realpaths of the allowed roots. */
  roots: string[];
  blockedPatterns: string[];
}

/** A mount ready for the runtime: the resolved host path and where it appears in the sandbox. */
export interface ResolvedMount {
  source: string;
  target: string;
}

/** Reads and validates the allowlist; null when the file does not exist. */
export async function loadMountAllowlist(file: string): Promise<MountAllowlist | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw notAllowed(`cannot read the mount allowlist ${file}: ${(err as Error).message}`, err);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw notAllowed(`the mount allowlist ${file} is not valid JSON`, err);
  }
  const parsed = allowlistSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw notAllowed(`the mount allowlist ${file}: ${issue.path.join('.') || '(file)'}: ${issue.message}`);
  }
  const roots: string[] = [];
  for (const root of parsed.data.allowedRoots) {
    const path = root.path.startsWith('~/') ? join(homedir(), root.path.slice(2)) : root.path;
    if (!isAbsolute(path)) throw notAllowed(`the mount allowlist ${file}: root ${root.path} is not absolute`);
    // A root that does not exist allows nothing; it is skipped, not an error.
    const real = await realpath(path).catch(() => null);
    if (real) roots.push(real);
  }
  return { roots, blockedPatterns: [...DEFAULT_BLOCKED_PATTERNS, ...parsed.data.blockedPatterns] };
}

/**
 * Resolves an agent's mounts against the allowlist file; throws MOUNT_NOT_ALLOWED naming
 * the mount and the reason. No mounts = nothing to check (the file is not even read).
 */
export async function resolveMounts(
  mounts: readonly AgentMount[],
  allowlistFile: string,
): Promise<ResolvedMount[]> {
  if (mounts.length === 0) return [];
  const allowlist = await loadMountAllowlist(allowlistFile);
  if (!allowlist) {
    throw notAllowed(`there is no mount allowlist at ${allowlistFile}, so no extra mounts are allowed`);
  }
  const resolved: ResolvedMount[] = [];
  for (const mount of mounts) {
    const what = `mount ${mount.hostPath} → ${mount.containerPath}`;
    if (!isAbsolute(mount.hostPath)) throw notAllowed(`${what}: the host path must be absolute`);
    const real = await realpath(mount.hostPath).catch(() => null);
    if (!real) throw notAllowed(`${what}: the host path does not exist`);
    if (!(await stat(real)).isDirectory()) throw notAllowed(`${what}: the host path is not a directory`);
    const root = allowlist.roots.find((r) => real === r || real.startsWith(r === sep ? r : r + sep));
    if (!root) {
      const via = real === mount.hostPath ? '' : ` (it resolves to ${real})`;
      throw notAllowed(`${what}: the host path is under no allowed root${via}`);
    }
    const blocked = blockedPatternIn(real, allowlist.blockedPatterns);
    if (blocked) throw notAllowed(`${what}: the path ${real} matches the blocked pattern "${blocked}"`);
    resolved.push({ source: real, target: `${MOUNTS_ROOT}/${mount.containerPath}` });
  }
  return resolved;
}

/** The first pattern that some component of the path contains (".env" blocks ".env.local"). */
export function blockedPatternIn(path: string, patterns: readonly string[]): string | undefined {
  const components = path.split(sep).filter(Boolean);
  return patterns.find((p) => components.some((c) => c.includes(p)));
}

function notAllowed(message: string, cause?: unknown): BerthError {
  return new BerthError(
    'MOUNT_NOT_ALLOWED',
    `Extra mount refused: ${message}`,
    cause ? { cause } : undefined,
  );
}
