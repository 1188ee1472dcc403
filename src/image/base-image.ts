// The sandbox base image `berth-base:<hash>`: a Debian minbase root with procps, the host's
// node binary at /usr/local/bin/node, user `berth` (1000:1000), /workspace, /opt/berth and
// /run/berth; PATH, USER 1000:1000 and WORKDIR /workspace set in the image config. This module
// holds the recipe, its tag and `ensureBaseImage`; the builds live in debootstrap-build.ts
// (default, offline) and dockerfile-build.ts (registry).
//
// Invariants:
// - The tag is a pure function of the recipe (suite, variant, packages, node binary content,
//   RECIPE_VERSION). It names the recipe, not the package versions a build happened to fetch:
//   bump RECIPE_VERSION to pick up a Debian point release or any change to the build steps.
// - `ensureBaseImage` never rebuilds an existing tag, and builds only with local means: the default
//   path runs debootstrap on the host (Debian's package mirror is the only network it needs) and
//   imports the root as a single layer, so no registry and no container network are involved.
// - Two concurrent builds of the same tag both succeed; the last import wins the tag. Their
//   roots are identical but for mtimes, so nothing depends on which one that is.
import type Dockerode from 'dockerode';
import type { BaseImageRecipe, BuildProgress } from './base-image-recipe.js';
import { buildFromDebootstrap } from './debootstrap-build.js';
import { buildFromDockerfile } from './dockerfile-build.js';
import { cachedSha256, sha256Hex } from './file-hash.js';
import { errorText } from './host-exec.js';

/** Bump when a build step changes (in either build); it invalidates both the tag and the rootfs cache. */
export const RECIPE_VERSION = 2;
export const BASE_IMAGE_REPO = 'berth-base';

export interface EnsureBaseImageOptions {
  /** Holds the node hash cache and the rootfs tarball cache. Created if missing. */
  cacheDir: string;
  /** @default 'debootstrap' */
  from?: 'debootstrap' | 'dockerfile';
  onProgress?: (p: BuildProgress) => void;
}

/** The inputs of the image; hashing the node binary is cached in `cacheDir` (see cachedSha256). */
export async function baseImageRecipe(
  cacheDir: string,
  nodePath: string = process.execPath,
): Promise<BaseImageRecipe> {
  return {
    recipeVersion: RECIPE_VERSION,
    suite: 'bookworm',
    variant: 'minbase',
    packages: ['procps'],
    nodePath,
    nodeSha256: await cachedSha256(nodePath, cacheDir),
  };
}

/**
 * `berth-base:<12 hex>`. The node binary enters by content only: the same binary found at
 * another path makes the same image, so the path is left out of the hash.
 */
export function baseImageTag(recipe: BaseImageRecipe): string {
  const inputs = [
    recipe.recipeVersion,
    recipe.suite,
    recipe.variant,
    [...recipe.packages].sort(),
    recipe.nodeSha256,
  ];
  return `${BASE_IMAGE_REPO}:${sha256Hex(JSON.stringify(inputs)).slice(0, 12)}`;
}

export async function ensureBaseImage(
  docker: Dockerode,
  opts: EnsureBaseImageOptions,
): Promise<{ tag: string; built: boolean }> {
  const onProgress = opts.onProgress ?? (() => {});
  // Creates cacheDir as a side effect (the node hash is recorded there).
  const recipe = await baseImageRecipe(opts.cacheDir);
  const tag = baseImageTag(recipe);
  if (await imageExists(docker, tag)) return { tag, built: false };
  if (opts.from === 'dockerfile') {
    await buildFromDockerfile(docker, tag, onProgress);
  } else {
    await buildFromDebootstrap(docker, recipe, tag, opts.cacheDir, onProgress);
  }
  return { tag, built: true };
}

export async function imageExists(docker: Dockerode, tag: string): Promise<boolean> {
  try {
    await docker.getImage(tag).inspect();
    return true;
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return false;
    throw new Error(
      `Cannot look up image ${tag} through the Docker Engine API (${errorText(err)}). ` +
        'Check that Docker is running (scripts/ensure-docker.sh) and try again.',
      { cause: err },
    );
  }
}
