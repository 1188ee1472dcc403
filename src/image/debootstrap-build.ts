// The default, offline build of the base image: debootstrap on the host into a temporary work
// directory, customise, add node, import. The customised root (everything but node) is cached as
// a tarball, so a new node binary costs an import, not a debootstrap.
//
// Invariants:
// - Runs only as root (debootstrap needs it) and needs no registry and no container network;
//   Debian's package mirror is the only network involved.
// - The rootfs cache is keyed by suite + variant + packages + RECIPE_VERSION, written under a
//   temporary name and renamed into place, so a reader never sees a partial tarball.
// - The work directory is removed on every exit path, after unmounting anything debootstrap may
//   have left mounted inside it.
import * as fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Dockerode from 'dockerode';
import { fsyncPath, moveIntoPlace, stagingPath } from '../durable-files/index.js';
import { debianMirror } from './apt-mirror.js';
import type { BaseImageRecipe, BuildProgress } from './base-image-recipe.js';
import { ensureDebootstrap, runDebootstrap } from './debootstrap.js';
import { sha256Hex } from './file-hash.js';
import { fileExists } from './files.js';
import { run } from './host-exec.js';
import { customizeRootfs, installNode } from './rootfs-finish.js';
import { importRootfs } from './rootfs-import.js';

/** What an image built on the base root adds before the import (agent images: the harnesses). */
export interface RootExtras {
  /** Adds files to the finished root (node is in place). */
  finish(root: string): Promise<void>;
  /** Image config lines (LABEL …). */
  changes: readonly string[];
}

export async function buildFromDebootstrap(
  docker: Dockerode,
  recipe: BaseImageRecipe,
  tag: string,
  cacheDir: string,
  onProgress: (p: BuildProgress) => void,
  extras?: RootExtras,
): Promise<void> {
  if (process.getuid?.() !== 0) {
    throw new Error(
      `Cannot build ${tag}: debootstrap must run as root. Run \`sudo berth image build\` once, ` +
        'or `berth image build --from dockerfile` if this machine can reach a container registry.',
    );
  }
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-rootfs-'));
  const root = path.join(work, 'root');
  try {
    const cachedRootfs = path.join(cacheDir, `rootfs-${recipe.suite}-${rootfsCacheKey(recipe)}.tar`);
    await fs.mkdir(root);
    if (await fileExists(cachedRootfs)) {
      onProgress({ phase: 'restore rootfs' });
      await run('tar', ['-C', root, '--numeric-owner', '-x', '-f', cachedRootfs]);
    } else {
      const debootstrap = await ensureDebootstrap(onProgress);
      await runDebootstrap(debootstrap, recipe, root, await debianMirror(recipe.suite), onProgress);
      onProgress({ phase: 'customize' });
      await customizeRootfs(root);
      onProgress({ phase: 'cache rootfs' });
      const partial = stagingPath(cachedRootfs, 'partial');
      try {
        await run('tar', ['-C', root, '--numeric-owner', '-c', '-f', partial, '.']);
        // A torn tarball under the cache's name would be restored by every later build.
        await fsyncPath(partial);
        await moveIntoPlace(partial, cachedRootfs);
      } finally {
        await fs.rm(partial, { force: true });
      }
    }
    onProgress({ phase: 'add node' });
    await installNode(recipe, root);
    await extras?.finish(root);
    onProgress({ phase: 'import' });
    await importRootfs(docker, root, tag, onProgress, extras?.changes);
  } finally {
    await removeWorkDir(work);
  }
}

function rootfsCacheKey(recipe: BaseImageRecipe): string {
  const inputs = [recipe.recipeVersion, recipe.suite, recipe.variant, [...recipe.packages].sort()];
  return sha256Hex(JSON.stringify(inputs)).slice(0, 12);
}

async function removeWorkDir(work: string): Promise<void> {
  // A debootstrap killed mid-way can leave proc/sys/devpts mounted inside the root; recursive
  // removal must never descend into those, so unmount whatever lies below `work` first.
  const mounts = (await fs.readFile('/proc/self/mounts', 'utf8'))
    .split('\n')
    .map((line) => line.split(' ')[1]?.replace(/\\040/g, ' '))
    .filter((m): m is string => m?.startsWith(`${work}/`) === true)
    .sort((a, b) => b.length - a.length);
  for (const mount of mounts) await run('umount', ['-l', mount]).catch(() => {});
  await fs.rm(work, { recursive: true, force: true });
}
