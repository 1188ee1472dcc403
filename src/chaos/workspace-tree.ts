/**
 * Whole workspaces as the checks compare them: the tree a session's committed messages
 * write (every file's path and content, every dir), the tree a dir on disk holds, and what
 * differs between two trees.
 *
 * What the committed messages write is replayed from their own plans, as the store holds
 * them (each message's text is its script plan): each message once, in the order the store
 * accepted it, its write and append steps applied and its putState steps recorded. So a
 * message applied twice, or out of order, or a partial write of an aborted attempt, or a
 * file no plan writes, makes the actual tree differ from the expected one. A run step's
 * effect cannot be replayed: the workload's run steps write no file (workload.ts). The
 * runner's own dir `.berth` (a model turn's call file lives there) and its reserved state
 * keys `berth.*` (a model turn's conversation) are berth's, written by no message: the
 * comparisons leave them out.
 *
 * Invariants: pure but for `readTree`, which only reads; a root dir that does not exist
 * reads as the empty tree (a session whose turns never committed has no committed dir).
 */
import { readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Message } from '../core/index.js';
import { readdirIfPresent } from './read-if-present.js';
import { readPlan } from './workload.js';

/**
 * A tree: relative path → a file's content, `->target` for a symlink, `/` for a dir, `!`
 * for anything else (a fifo, a socket, a device: no plan makes one, and reading it could block).
 */
export type Tree = Map<string, string>;

/** What a session's committed messages leave: its workspace tree and its state. */
export interface Effects {
  tree: Tree;
  state: Record<string, unknown>;
}

const DIR = '/';
const SPECIAL = '!';

/** The tree under `root`, read from disk. Any failure to read but the root's absence throws. */
export async function readTree(root: string, rel = '', into: Tree = new Map()): Promise<Tree> {
  for (const d of await readdirIfPresent(join(root, rel), { withFileTypes: true })) {
    const path = rel ? `${rel}/${d.name}` : d.name;
    if (d.isDirectory()) {
      into.set(path, DIR);
      await readTree(root, path, into);
    } else if (d.isSymbolicLink()) into.set(path, `->${await readlink(join(root, path))}`);
    else if (d.isFile()) into.set(path, await readFile(join(root, path), 'utf8'));
    else into.set(path, SPECIAL);
  }
  return into;
}

/**
 * What the inbound messages with these ids write, each once, in id order (the order the
 * store accepted them); a message that holds no plan writes nothing.
 */
export function expectedEffects(messages: Message[], ids: Iterable<number>): Effects {
  const taken = new Set(ids);
  const effects: Effects = { tree: new Map(), state: {} };
  const inbound = messages.filter((m) => m.direction === 'in' && taken.has(m.id)).sort((a, b) => a.id - b.id);
  for (const m of inbound)
    for (const step of readPlan(m.text)?.steps ?? []) {
      if ('write' in step) putFile(effects.tree, step.write.path, step.write.content);
      else if ('append' in step)
        putFile(
          effects.tree,
          step.append.path,
          (effects.tree.get(step.append.path) ?? '') + step.append.content,
        );
      else if ('putState' in step) effects.state[step.putState.key] = step.putState.value;
    }
  return effects;
}

/** The state without the runner's reserved keys (`berth.*`). */
export function workloadState(state: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(state).filter(([key]) => !key.startsWith('berth.')));
}

function putFile(tree: Tree, path: string, content: string): void {
  const parts = path.split('/');
  for (let i = 1; i < parts.length; i++) tree.set(parts.slice(0, i).join('/'), DIR);
  tree.set(path, content);
}

const RUNNER_DIR = '.berth';

/** How `actual` (but the runner's own dir) differs from `expected`, one phrase per kind of difference; null when they are equal. */
export function treeDiff(withRunnerDir: Tree, expected: Tree): string | null {
  const actual = new Map(
    [...withRunnerDir].filter(([p]) => p !== RUNNER_DIR && !p.startsWith(`${RUNNER_DIR}/`)),
  );
  const missing = [...expected.keys()].filter((p) => !actual.has(p));
  const extra = [...actual.keys()].filter((p) => !expected.has(p));
  const changed = [...expected.keys()].filter((p) => actual.has(p) && actual.get(p) !== expected.get(p));
  const parts: string[] = [];
  if (missing.length > 0) parts.push(`missing ${listed(missing)}`);
  if (extra.length > 0) parts.push(`no committed message wrote ${listed(extra)}`);
  for (const p of changed.slice(0, 3))
    parts.push(`${p} is ${shown(actual.get(p)!)}, expected ${shown(expected.get(p)!)}`);
  if (changed.length > 3) parts.push(`${changed.length - 3} more files differ`);
  return parts.length === 0 ? null : parts.join('; ');
}

const listed = (paths: string[]) =>
  paths.slice(0, 5).join(', ') + (paths.length > 5 ? ` and ${paths.length - 5} more` : '');

/** An entry as a reader takes it: a file by its last 60 characters, as JSON (the end of an appended log is where it goes wrong). */
function shown(entry: string): string {
  if (entry === DIR) return 'a dir';
  if (entry === SPECIAL) return 'neither a file, a dir nor a symlink';
  if (entry.startsWith('->')) return `a symlink to ${entry.slice(2)}`;
  return JSON.stringify(entry.length > 60 ? `…${entry.slice(-60)}` : entry);
}
