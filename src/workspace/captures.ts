/**
 * The part of a capture (a running turn's checkpoint, a resident workspace's capture) that
 * is the same for both: what changed between two indexes of a tree (checkpoint-scan.ts),
 * packed while the sandbox is frozen, then uploaded once it is thawed. A large archive is
 * packed to a scratch file beside the tree (never inside it), removed after the upload.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { WorkspaceObjectRef } from '../core/index.js';
import { type CheckpointIndex, checkpointDelta } from './checkpoint-scan.js';
import type { PackedObject, WorkspaceCache } from './workspace-cache.js';

/** A checkpoint scanned and packed (Workspaces.captureCheckpoint, captureResident), not yet uploaded. */
export interface CapturedCheckpoint {
  /** The attempt layer now: the base of the next checkpoint. */
  index: CheckpointIndex;
  /** How many changes it holds (0: none, and no archive). */
  steps: number;
  archive: PackedObject | null;
  /** The local file a large archive was packed to, removed by uploadCheckpoint. */
  scratch: string | null;
}

/** What changed from `before` to `index`, packed from `upper`; no archive when nothing did. */
export async function packDelta(
  cache: WorkspaceCache,
  before: CheckpointIndex,
  index: CheckpointIndex,
  upper: string,
  scratchDir: string,
): Promise<CapturedCheckpoint> {
  const plan = checkpointDelta(before, index);
  if (plan.steps.length === 0) return { index, steps: 0, archive: null, scratch: null };
  const scratch = join(scratchDir, `checkpoint-${randomBytes(4).toString('hex')}.tgz`);
  try {
    const archive = await cache.packCheckpoint(plan, upper, scratch);
    return { index, steps: plan.steps.length, archive, scratch };
  } catch (err) {
    await rm(scratch, { force: true });
    throw err;
  }
}

/** A captured archive as an object under `prefix`; null when it holds no change. Its scratch goes in every case. */
export async function uploadCaptured(
  cache: WorkspaceCache,
  captured: CapturedCheckpoint,
  prefix: 'checkpoints' | 'layers' | 'snapshots',
): Promise<WorkspaceObjectRef | null> {
  if (!captured.archive) return null;
  try {
    return await cache.putPacked(prefix, captured.archive);
  } finally {
    if (captured.scratch) await rm(captured.scratch, { force: true });
  }
}
