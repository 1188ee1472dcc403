/**
 * Files of a session's live sandbox (GET/PUT/DELETE /v1/sessions/:id/sandbox/files...): the
 * requests a client sends and the path policy both the API and the worker apply. A path is
 * relative to the workspace, or absolute under SANDBOX_WORKSPACE (what the agent sees);
 * it never leaves the workspace by its text (no ".." above the root, no other absolute
 * path). Where it leaves by a symlink is for the worker to see, on the files themselves.
 */
import { z } from 'zod';
import { BerthError } from './errors.js';
import { SANDBOX_WORKSPACE } from './protocol.js';

const MAX_PATH_CHARS = 4096;

/** One entry of a directory, or a path's stat. */
export interface SandboxFileEntry {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  mtimeMs: number;
  /** Permission bits (e.g. 0o644). */
  mode: number;
}

/**
 * The path's segments under the workspace root ([] = the root itself). Refuses (400
 * PATH_OUTSIDE_WORKSPACE) an absolute path outside SANDBOX_WORKSPACE, ".." climbing above
 * the root, a NUL, and text that was not valid UTF-8 (decoded to U+FFFD).
 */
export function workspaceSegments(path: string): string[] {
  const refuse = (why: string) =>
    new BerthError('PATH_OUTSIDE_WORKSPACE', `Path ${JSON.stringify(path.slice(0, 200))} ${why}`);
  if (path.includes('\0')) throw refuse('holds a NUL character');
  if (path.includes('\uFFFD'))
    throw refuse('is not valid UTF-8 (only UTF-8 names are served; rename the file from inside the sandbox)');
  let rest = path;
  if (path.startsWith('/')) {
    if (path !== SANDBOX_WORKSPACE && !path.startsWith(`${SANDBOX_WORKSPACE}/`))
      throw refuse(`is absolute outside ${SANDBOX_WORKSPACE}: give it relative to the workspace`);
    rest = path.slice(SANDBOX_WORKSPACE.length);
  }
  const segments: string[] = [];
  for (const segment of rest.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment !== '..') segments.push(segment);
    else if (segments.pop() === undefined) throw refuse('climbs above the workspace with ".."');
  }
  return segments;
}

const pathField = z.string().max(MAX_PATH_CHARS);
const flag = z.enum(['true', 'false']).transform((v) => v === 'true');

/** ?path= of a file or directory (the workspace root when absent). */
export const sandboxPathQuerySchema = z.object({ path: pathField.default('') }).strict();

/** PUT .../content: `mkdirs` makes the missing parent directories. */
export const sandboxWriteQuerySchema = z
  .object({ path: pathField.min(1, 'path names the file to write'), mkdirs: flag.default('false') })
  .strict();

/** DELETE: a non-empty directory only with recursive=true. */
export const sandboxRemoveQuerySchema = z
  .object({ path: pathField.min(1, 'path names what to remove'), recursive: flag.default('false') })
  .strict();

/** POST .../mkdir: its parents too when `parents` (as mkdir -p: an existing directory is fine). */
export const sandboxMkdirSchema = z
  .object({ path: pathField.min(1, 'path names the directory to make'), parents: z.boolean().optional() })
  .strict();

export const sandboxRenameSchema = z
  .object({ from: pathField.min(1, 'from names what to move'), to: pathField.min(1, 'to names where') })
  .strict();
