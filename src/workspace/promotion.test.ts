/**
 * Sealing and promotion against a real overlay mount: deletes (whiteouts), a re-created
 * directory (opaque), type changes, and a promotion cut short and applied again.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { mountOverlay, unmountAll } from './overlay-mounts.js';
import { applyPlan, PLAN_FILE, type PromotionPlan, sealLayer } from './promotion.js';

async function tree(dir: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(join(dir, rel), { withFileTypes: true })) {
    const path = join(rel, e.name);
    if (e.isDirectory()) out.push(`${path}/`, ...(await tree(dir, path)));
    else if (e.isSymbolicLink()) out.push(`${path} -> link`);
    else out.push(`${path} = ${await readFile(join(dir, path), 'utf8')}`);
  }
  return out.sort();
}

test('a sealed layer promotes to exactly the merged view, and re-applying a cut-short plan is harmless', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'berth-promo-'));
  const [committed, upper, work, merged] = ['committed', 'upper', 'work', 'merged'].map((d) =>
    join(root, d),
  ) as [string, string, string, string];
  for (const d of [committed, upper, work, merged]) await mkdir(d);
  await writeFile(join(committed, 'keep.txt'), 'keep');
  await writeFile(join(committed, 'gone.txt'), 'gone');
  await writeFile(join(committed, 'edit.txt'), 'old');
  await mkdir(join(committed, 'dir'));
  await writeFile(join(committed, 'dir', 'a'), 'a');
  await writeFile(join(committed, 'dir', 'b'), 'b');
  await writeFile(join(committed, 'was-file'), 'file');
  await mkdir(join(committed, 'was-dir'));
  await writeFile(join(committed, 'was-dir', 'x'), 'x');
  await mountOverlay(merged, { lower: committed, upper, work });
  t.after(async () => {
    await unmountAll(merged);
    await rm(root, { recursive: true, force: true });
  });

  // What a turn does, through the merged view.
  await rm(join(merged, 'gone.txt'));
  await writeFile(join(merged, 'edit.txt'), 'new');
  await rm(join(merged, 'dir'), { recursive: true });
  await mkdir(join(merged, 'dir'));
  await writeFile(join(merged, 'dir', 'c'), 'c');
  await rm(join(merged, 'was-file'));
  await mkdir(join(merged, 'was-file'));
  await writeFile(join(merged, 'was-file', 'inside'), 'in');
  await rm(join(merged, 'was-dir'), { recursive: true });
  await writeFile(join(merged, 'was-dir'), 'now a file');
  await mkdir(join(merged, 'new', 'deep'), { recursive: true });
  await writeFile(join(merged, 'new', 'deep', 'f'), 'f');
  await symlink('keep.txt', join(merged, 'link'));
  const expected = await tree(merged);

  const planFile = join(root, PLAN_FILE);
  const plan: PromotionPlan = await sealLayer({ upper, merged, committed, planFile });
  await unmountAll(merged);

  // A crash after the first few steps, then recovery applies the whole plan again.
  await writeFile(`${planFile}.partial`, JSON.stringify({ ...plan, steps: plan.steps.slice(0, 4) }));
  await applyPlan(`${planFile}.partial`, { upper, committed });
  await applyPlan(planFile, { upper, committed });
  assert.deepEqual(await tree(committed), expected);
  await applyPlan(planFile, { upper, committed });
  assert.deepEqual(await tree(committed), expected, 'idempotent');
});
