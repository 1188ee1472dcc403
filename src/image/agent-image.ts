// Agent images `berth-agent:<hash>`: the base image plus the harnesses an agent runs (their
// pinned npm packages, linked executables and Debian packages), like NanoClaw's per-group
// images. Built offline the way the base is (debootstrap root from the cache, the host's
// node), with the harnesses' npm packages staged on the host from the npm registry, then
// imported as one image carrying the label berth.harnesses=<names>.
//
// Invariants:
// - The tag is a pure function of the recipe: the base recipe (node included), the
//   harnesses, their exact npm packages and the Debian packages, and AGENT_RECIPE_VERSION.
//   An existing tag is never rebuilt.
// - Every linked executable is run once in the finished root (`--version`) before the
//   import, so no image gets a tag whose harness cannot start.
import * as fs from 'node:fs/promises';
import path from 'node:path';
import type Dockerode from 'dockerode';
import { BerthError, HARNESS_PROVIDERS, type HarnessName, LABELS } from '../core/index.js';
import { type BaseImageRecipe, type BuildProgress, baseImageRecipe, imageExists } from './base-image.js';
import { buildFromDebootstrap } from './debootstrap-build.js';
import { sha256Hex } from './file-hash.js';
import { HARNESS_RECIPES } from './harness-recipes.js';
import { errorText, run } from './host-exec.js';
import { stageNpmPackages } from './npm-staging.js';

/** Bump when the way agent images are put together changes. */
export const AGENT_RECIPE_VERSION = 1;
export const AGENT_IMAGE_REPO = 'berth-agent';
/** Where the harnesses' node_modules live in an agent image. */
export const HARNESS_PREFIX = '/usr/local/lib/berth-harnesses';

export interface AgentImageRecipe {
  recipeVersion: number;
  base: BaseImageRecipe;
  harnesses: HarnessName[];
  npm: string[];
  apt: string[];
}

/** The recipe for these harnesses (and any extra Debian packages) on this host's base recipe. */
export async function agentImageRecipe(
  cacheDir: string,
  harnesses: readonly string[],
  extraApt: readonly string[] = [],
): Promise<AgentImageRecipe> {
  const names = parseHarnesses(harnesses);
  const sortedUnique = (xs: string[]) => [...new Set(xs)].sort();
  return {
    recipeVersion: AGENT_RECIPE_VERSION,
    base: await baseImageRecipe(cacheDir),
    harnesses: names,
    npm: sortedUnique(names.flatMap((h) => [...HARNESS_RECIPES[h].npm])),
    apt: sortedUnique([...names.flatMap((h) => [...HARNESS_RECIPES[h].apt]), ...extraApt]),
  };
}

/** Known harness names, sorted and de-duplicated; INVALID_INPUT for any other. */
export function parseHarnesses(harnesses: readonly string[]): HarnessName[] {
  const unknown = harnesses.filter((h) => !(HARNESS_PROVIDERS as readonly string[]).includes(h));
  if (unknown.length > 0 || harnesses.length === 0)
    throw new BerthError(
      'INVALID_INPUT',
      `Unknown harness ${unknown.join(', ') || '(none given)'}: berth builds images with ${HARNESS_PROVIDERS.join(', ')}`,
    );
  return [...new Set(harnesses as HarnessName[])].sort();
}

export function agentImageTag(recipe: AgentImageRecipe): string {
  const b = recipe.base;
  const inputs = [
    recipe.recipeVersion,
    [b.recipeVersion, b.suite, b.variant, [...b.packages].sort(), b.nodeSha256],
    recipe.harnesses,
    recipe.npm,
    recipe.apt,
  ];
  return `${AGENT_IMAGE_REPO}:${sha256Hex(JSON.stringify(inputs)).slice(0, 12)}`;
}

/** The command that builds the image for these harnesses, for messages. */
export function agentImageBuildCommand(harnesses: readonly string[]): string {
  return `berth image build --with ${[...harnesses].sort().join(',')}`;
}

export async function ensureAgentImage(
  docker: Dockerode,
  opts: {
    cacheDir: string;
    harnesses: readonly string[];
    apt?: readonly string[];
    onProgress?: (p: BuildProgress) => void;
  },
): Promise<{ tag: string; built: boolean }> {
  const onProgress = opts.onProgress ?? (() => {});
  const recipe = await agentImageRecipe(opts.cacheDir, opts.harnesses, opts.apt);
  const tag = agentImageTag(recipe);
  if (await imageExists(docker, tag)) return { tag, built: false };
  onProgress({ phase: 'npm install' });
  const modules = await stageNpmPackages(opts.cacheDir, recipe.npm);
  // The Debian packages join debootstrap's --include: their root is cached like the base's.
  const rootRecipe = {
    ...recipe.base,
    packages: [...new Set([...recipe.base.packages, ...recipe.apt])].sort(),
  };
  await buildFromDebootstrap(docker, rootRecipe, tag, opts.cacheDir, onProgress, {
    finish: (root) => installHarnesses(root, modules, recipe.harnesses, onProgress),
    changes: [`LABEL ${LABELS.harnesses}=${recipe.harnesses.join(',')}`],
  });
  return { tag, built: true };
}

/** The harnesses an image holds (its label), or null when the image does not exist. */
export async function imageHarnesses(docker: Dockerode, image: string): Promise<string[] | null> {
  try {
    const info = await docker.getImage(image).inspect();
    const label = info.Config?.Labels?.[LABELS.harnesses] ?? '';
    return label ? label.split(',') : [];
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return null;
    throw err;
  }
}

async function installHarnesses(
  root: string,
  modules: string,
  harnesses: HarnessName[],
  onProgress: (p: BuildProgress) => void,
): Promise<void> {
  onProgress({ phase: 'add harnesses' });
  const target = path.join(root, HARNESS_PREFIX.slice(1), 'node_modules');
  await fs.mkdir(path.dirname(target), { recursive: true });
  // cp -a keeps modes and hard links; owned by root, read-only to the sandbox user.
  await run('cp', ['-a', modules, target]);
  await run('chown', ['-R', '0:0', path.dirname(target)]);
  for (const harness of harnesses) {
    for (const [bin, perArch] of Object.entries(HARNESS_RECIPES[harness].bins)) {
      const relative = perArch[process.arch];
      if (!relative)
        throw new Error(`berth has no ${harness} executable for ${process.arch} (HARNESS_RECIPES)`);
      const link = path.join(root, 'usr/local/bin', bin);
      await fs.rm(link, { force: true });
      await fs.symlink(path.join(HARNESS_PREFIX, 'node_modules', relative), link);
      await proveRuns(root, `/usr/local/bin/${bin}`);
    }
  }
}

/** Character devices a sandbox has (Docker makes them); Bun-compiled binaries crash without them. */
const DEVICES: [string, string, string][] = [
  ['null', '1', '3'],
  ['zero', '1', '5'],
  ['random', '1', '8'],
  ['urandom', '1', '9'],
];

/**
 * Runs `<bin> --version` in the root, with /proc (Bun-compiled binaries read /proc/self/exe)
 * and the usual devices, which are removed again: the image gets Docker's own /dev.
 */
async function proveRuns(root: string, bin: string): Promise<void> {
  const proc = path.join(root, 'proc');
  const dev = path.join(root, 'dev');
  await fs.mkdir(proc, { recursive: true });
  await fs.mkdir(dev, { recursive: true });
  for (const [name, major, minor] of DEVICES) {
    await fs.rm(path.join(dev, name), { force: true });
    await run('mknod', ['-m', '666', path.join(dev, name), 'c', major, minor]);
  }
  await run('mount', ['-t', 'proc', 'proc', proc]);
  try {
    await run('chroot', [
      root,
      '/usr/bin/env',
      '-i',
      'PATH=/usr/local/bin:/usr/bin:/bin',
      'HOME=/tmp',
      bin,
      '--version',
    ]);
  } catch (err) {
    throw new Error(`${bin} does not run in the agent image root: ${errorText(err)}`, { cause: err });
  } finally {
    await run('umount', ['-l', proc]).catch(() => {});
    for (const [name] of DEVICES) await fs.rm(path.join(dev, name), { force: true });
  }
}
