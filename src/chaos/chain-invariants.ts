/**
 * The invariants of the sessions' workspace chains, read from the store and the blob store
 * alone, never from a machine's copy: they hold whatever happened to any node's disk.
 *
 *   chain-objects-present  every object a session's chain names (its newest snapshot and the
 *                          layers after it) is in the blob store, at the size the chain says
 *   workspace-from-chain   the chain, applied object by object into an empty dir, gives at
 *                          each of its versions the whole tree the messages of the committed
 *                          turns before it write (workspace-tree.ts: every path and content,
 *                          nothing else), and it ends at the session's committed turns: the
 *                          final workspace is theirs
 *   never-behind           no turn ran on a workspace behind the store: in commit order the
 *                          committed turns ran on versions 0, 1, 2, … (each on what its
 *                          predecessor committed), every layer of the chain is the work of the
 *                          committed turn that ran on the version before it, and no message
 *                          found an older committed log.txt than its turn number says (each
 *                          message's first step checks it, and the turn's error says what it
 *                          found), but a message excused by excuses.ts, listed as excused
 *
 * Invariants of this module: it only reads the store snapshot and the blob store (objects
 * are applied into a temp dir it removes); each named invariant appears exactly once in the
 * result. `committedTrees` gives each session's final tree as the chain has it, for the
 * committed-workspace invariant of a run whose sessions have no single disk.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BlobStore } from '../blobs/index.js';
import type { ChainEntry, FailedStep, Turn } from '../core/index.js';
import { applyLayerArchive } from '../workspace/index.js';
import { type InvariantResult, result } from './invariant-result.js';
import { reportedSteps, type SessionSnapshot } from './snapshot.js';
import { expectedLog, LOG_FILE } from './workload.js';
import { expectedEffects, readTree, type Tree, treeDiff } from './workspace-tree.js';

export interface ChainCheck {
  results: InvariantResult[];
  /** Each session's final tree, materialised from its chain (null: it could not be). */
  committedTrees: Map<string, Tree | null>;
}

/** `excused`: the messages whose failed asserts are excused (excuses.ts), each with why. */
export async function checkChains(
  sessions: SessionSnapshot[],
  blobs: BlobStore,
  excused: Map<number, string>,
): Promise<ChainCheck> {
  const missing: string[] = [];
  const mismatched: string[] = [];
  const committedTrees = new Map<string, Tree | null>();
  const scratch = await mkdtemp(join(tmpdir(), 'berth-chain-check-'));
  try {
    for (const s of sessions) {
      const absent = await absentObjects(s, blobs);
      missing.push(...absent);
      const trees = absent.length === 0 ? await materialise(s, blobs, join(scratch, s.id)) : null;
      const committedTurns = s.turns.filter((t) => t.status === 'committed');
      const committed = committedTurns.length;
      if (!trees) {
        mismatched.push(`${s.id}: cannot be materialised, ${absent.length} of its objects are missing`);
        committedTrees.set(s.id, null);
        continue;
      }
      for (const [version, tree] of trees) {
        const wrong = treeDiff(
          tree,
          expectedEffects(s.messages, messagesBefore(committedTurns, version)).tree,
        );
        if (wrong) mismatched.push(`${s.id}: at version ${version} ${wrong}`);
      }
      const final = [...trees.values()].at(-1) ?? new Map();
      const last = s.chain.entries.at(-1)?.version ?? 0;
      if (s.chain.version !== committed || last !== committed)
        mismatched.push(
          `${s.id}: the chain is at version ${s.chain.version} (its newest object ${last}), but ${committed} turns committed`,
        );
      committedTrees.set(s.id, final);
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  const objects = sessions.reduce((n, s) => n + s.chain.entries.length, 0);
  return {
    results: [
      result(
        'chain-objects-present',
        `${objects} objects named by ${sessions.length} chains: ${missing.length} missing from the blob store`,
        missing,
      ),
      result(
        'workspace-from-chain',
        `${sessions.length} workspaces materialised from the blob store equal what their committed turns wrote`,
        mismatched,
      ),
      neverBehind(sessions, excused),
    ],
    committedTrees,
  };
}

/** Objects of the chain the blob store does not hold, or holds at another size. */
async function absentObjects(s: SessionSnapshot, blobs: BlobStore): Promise<string[]> {
  const out: string[] = [];
  for (const e of s.chain.entries) {
    const info = await blobs.head(e.key);
    if (!info) out.push(`${s.id}: ${e.kind} of version ${e.version} (${e.key}) is not in the blob store`);
    else if (info.size !== e.size)
      out.push(
        `${s.id}: ${e.kind} of version ${e.version} (${e.key}) is ${info.size} bytes, the chain says ${e.size}`,
      );
  }
  return out;
}

/** The tree after each object of the chain, by version (version 0: empty, when the chain has no snapshot). */
async function materialise(s: SessionSnapshot, blobs: BlobStore, dir: string): Promise<Map<number, Tree>> {
  const trees = new Map<number, Tree>();
  const entries: ChainEntry[] = s.chain.entries;
  if (entries[0]?.kind !== 'snapshot') trees.set(0, new Map());
  for (const e of entries) {
    await applyLayerArchive((await blobs.get(e.key)).body, dir);
    trees.set(e.version, await readTree(dir));
  }
  return trees;
}

/** The messages the committed turns that ran on the versions before `version` took. */
function messagesBefore(committed: Turn[], version: number): number[] {
  return committed
    .filter((t) => t.baseVersion !== null && t.baseVersion < version)
    .flatMap((t) => t.messageIds);
}

function neverBehind(sessions: SessionSnapshot[], excused: Map<number, string>): InvariantResult {
  const details: string[] = [];
  const excusedLines: string[] = [];
  let turns = 0;
  for (const s of sessions) {
    turns += s.turns.length;
    const committed = s.turns.filter((t) => t.status === 'committed');
    const bases = committed.map((t) => t.baseVersion ?? -1).sort((a, b) => a - b);
    if (bases.some((base, i) => base !== i))
      details.push(
        `${s.id}: its committed turns ran on versions ${JSON.stringify(bases)}, not 0..${committed.length - 1}`,
      );
    const baseOf = new Map(committed.map((t) => [t.id, t.baseVersion]));
    for (const e of s.chain.entries.filter((x) => x.kind === 'layer')) {
      const base = e.turnId ? baseOf.get(e.turnId) : undefined;
      if (base !== e.version - 1)
        details.push(
          `${s.id}: the layer of version ${e.version} comes from turn ${e.turnId}, which ${base === undefined ? 'did not commit' : `ran on version ${base}`}`,
        );
    }
    const steps = reportedSteps(s);
    for (const t of s.turns) {
      const failed = steps.get(t.id);
      const found = failed ? staleStart(failed) : null;
      if (!failed || !found) continue;
      const line = `${s.id}: turn ${t.id} (attempt ${t.attempt}) found the log of ${found.had} messages where ${found.want} had committed`;
      const why = excused.get(failed.messageId);
      if (why) excusedLines.push(`${line} [message ${failed.messageId}: ${why}]`);
      else details.push(line);
    }
  }
  return result(
    'never-behind',
    `${turns} turns: none ran on a workspace behind the store`,
    details,
    excusedLines,
  );
}

/**
 * From a turn's failed step, as the runner recorded it (FailedStep.assertion): a message's
 * opening log.txt check found the whole log of fewer messages than it expected.
 */
function staleStart(step: FailedStep): { had: number; want: number } | null {
  const a = step.assertion;
  if (step.kind !== 'assertFile' || a?.subject !== LOG_FILE || typeof a.expected !== 'string') return null;
  const found = typeof a.found === 'string' ? a.found : '';
  const versionOf = (log: string) => (log.match(/\n/g)?.length ?? 0) / 2;
  const had = versionOf(found);
  const want = versionOf(a.expected);
  return Number.isInteger(had) && had < want && found === expectedLog(had) ? { had, want } : null;
}
