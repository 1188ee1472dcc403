/**
 * Promotion of a sealed attempt layer into the committed layer.
 *
 * Sealing (before the store commit, while the attempt overlay is still mounted) walks the
 * layer's upper dir and the merged view and writes a plan: which committed entries to
 * delete (gone from the merged view: whiteouts, opaque dirs), which dirs to create, which
 * files to move in from the upper dir. Writing the plan is the only step that needs space,
 * so a full disk aborts the turn with the committed layer intact.
 *
 * Applying the plan (after the store commit) is renames, deletes and mkdirs only, each
 * step idempotent (a moved file's source is gone; a deleted entry is absent), so a
 * promotion cut by a crash is simply applied again at recovery.
 */
import { chmod, chown, lstat, mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { failpoint } from '../core/index.js';
import { fsyncPath, writeFileAtomic } from '../durable-files/index.js';

export type PlanStep =
  | { op: 'delete'; path: string }
  | { op: 'mkdir'; path: string; mode: number; uid: number; gid: number }
  | { op: 'move'; from: string; path: string };

export interface PromotionPlan {
  version: 1;
  steps: PlanStep[];
}

export const PLAN_FILE = 'plan.json';

/** Builds the plan from the upper dir, the merged view and the committed dir; writes it durably next to the upper dir. */
export async function sealLayer(dirs: {
  upper: string;
  merged: string;
  committed: string;
  planFile: string;
}): Promise<PromotionPlan> {
  const steps: PlanStep[] = [];
  await planDir('', dirs, steps);
  const plan: PromotionPlan = { version: 1, steps };
  await writeFileAtomic(dirs.planFile, JSON.stringify(plan));
  return plan;
}

async function planDir(
  rel: string,
  dirs: { upper: string; merged: string; committed: string },
  steps: PlanStep[],
): Promise<void> {
  const merged = new Set(await readdir(join(dirs.merged, rel)));
  for (const name of await listDir(join(dirs.committed, rel))) {
    if (!merged.has(name)) steps.push({ op: 'delete', path: join(rel, name) });
  }
  for (const entry of await readdir(join(dirs.upper, rel), { withFileTypes: true })) {
    const path = join(rel, entry.name);
    if (entry.isCharacterDevice()) continue; // a whiteout: its delete is planned above
    if (entry.isDirectory()) {
      const st = await lstat(join(dirs.upper, path));
      steps.push({ op: 'mkdir', path, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid });
      await planDir(path, dirs, steps);
    } else {
      // The store commit follows the seal: the turn's file contents must be on disk before it.
      if (entry.isFile()) await fsyncPath(join(dirs.upper, path));
      steps.push({ op: 'move', from: path, path });
    }
  }
}

/** Applies a sealed plan; safe to run again after a crash at any step. */
export async function applyPlan(planFile: string, dirs: { upper: string; committed: string }): Promise<void> {
  const plan = JSON.parse(await readFile(planFile, 'utf8')) as PromotionPlan;
  const touchedDirs = new Set<string>([dirs.committed]);
  for (const [index, step] of plan.steps.entries()) {
    if (index === Math.floor(plan.steps.length / 2) && index > 0) failpoint('mid-promotion');
    touchedDirs.add(dirname(join(dirs.committed, step.path)));
    const target = join(dirs.committed, step.path);
    switch (step.op) {
      case 'delete':
        await rm(target, { recursive: true, force: true });
        break;
      case 'mkdir': {
        const st = await lstat(target).catch(() => null);
        if (st && !st.isDirectory()) await rm(target, { force: true });
        if (!st?.isDirectory()) await mkdir(target).catch(ignoreCode('EEXIST'));
        await chown(target, step.uid, step.gid);
        await chmod(target, step.mode);
        break;
      }
      case 'move': {
        const source = join(dirs.upper, step.from);
        if (!(await lstat(source).catch(() => null))) break; // moved by an earlier, interrupted run
        const st = await lstat(target).catch(() => null);
        if (st?.isDirectory()) await rm(target, { recursive: true, force: true });
        await rename(source, target).catch(ignoreCode('ENOENT'));
        break;
      }
    }
  }
  // The layer is deleted after this: the renames must be durable first.
  for (const dir of touchedDirs) await fsyncPath(dir).catch(() => undefined);
}

async function listDir(path: string): Promise<string[]> {
  try {
    return await readdir(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR')
      return [];
    throw err;
  }
}

/** Another run of the same plan got there first: the step's effect is already in place. */
function ignoreCode(code: string): (err: NodeJS.ErrnoException) => void {
  return (err) => {
    if (err.code !== code) throw err;
  };
}
