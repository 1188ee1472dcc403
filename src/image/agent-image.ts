// Agent images `berth-agent:<hash>`: the base image plus what an agent needs beyond it, like
// NanoClaw's per-group images: the harness its provider runs (its pinned npm packages, linked
// executables and Debian packages) and the agent's own packages (Debian packages, npm packages
// at exact versions). Built offline the way the base is (debootstrap root from the cache, the
// host's node), with the npm packages staged on the host from the npm registry, then imported
// as one image labelled with what it holds (berth.harnesses, berth.apt, berth.npm).
//
// Invariants:
// - The tag is a pure function of the recipe: the base recipe (node included), the
//   harnesses, their exact npm packages, the Debian packages, the agent's npm packages and
//   AGENT_RECIPE_VERSION. An existing tag is never rebuilt. A recipe without agent npm
//   packages hashes as it did before they existed, so images already built keep their tags.
// - The harnesses' npm packages and the agent's are installed apart (HARNESS_PREFIX,
//   PACKAGES_PREFIX): a harness runs the dependency tree it was pinned with, whatever the
//   agent adds.
// - Every linked harness executable is run once in the finished root (`--version`) before
//   the import, so no image gets a tag whose harness cannot start.
import * as fs from 'node:fs/promises';
import path from 'node:path';
import type Dockerode from 'dockerode';
import {
  type AgentImageNeeds,
  BerthError,
  debianNameProblem,
  HARNESS_PROVIDERS,
  type HarnessName,
  LABELS,
  npmPinProblem,
} from '../core/index.js';
import { baseImageRecipe, imageExists } from './base-image.js';
import type { BaseImageRecipe, BuildProgress } from './base-image-recipe.js';
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
/**
 * Where the agent's own npm packages live in an agent image: their executables are linked
 * into /usr/local/bin, and NODE_PATH (set in the image) lets `require` find them.
 */
export const PACKAGES_PREFIX = '/usr/local/lib/berth-packages';

export interface AgentImageRecipe {
  recipeVersion: number;
  base: BaseImageRecipe;
  harnesses: HarnessName[];
  /** The harnesses' npm packages (name@version), in HARNESS_PREFIX. */
  npm: string[];
  /** Debian packages beyond the base: the harnesses' and the agent's. */
  apt: string[];
  /** The agent's own npm packages (name@version), in PACKAGES_PREFIX. */
  packages: string[];
}

/** What an agent image is asked to hold: harness names, Debian packages, npm name@version. */
export interface AgentImageWants {
  harnesses?: readonly string[];
  apt?: readonly string[];
  npm?: readonly string[];
}

/** The recipe for these harnesses and packages on this host's base recipe; INVALID_INPUT for a bad name or an unpinned npm package. */
export async function agentImageRecipe(cacheDir: string, wants: AgentImageWants): Promise<AgentImageRecipe> {
  const names = parseHarnesses(wants.harnesses ?? []);
  const problems = [
    ...(wants.apt ?? []).map(debianNameProblem),
    ...(wants.npm ?? []).map(npmPinProblem),
  ].filter((p) => p !== null);
  if (problems.length > 0)
    throw new BerthError('INVALID_INPUT', `Invalid agent image: ${problems.join('; ')}`, {
      hint: 'Name Debian packages by name (jq) and npm packages at an exact version (typescript@5.6.3).',
    });
  if (names.length + (wants.apt?.length ?? 0) + (wants.npm?.length ?? 0) === 0)
    throw new BerthError(
      'INVALID_INPUT',
      'An agent image adds harnesses or packages to the base image: give --with, --apt or --npm (berth image build alone builds the base image)',
    );
  const sortedUnique = (xs: readonly string[]) => [...new Set(xs)].sort();
  return {
    recipeVersion: AGENT_RECIPE_VERSION,
    base: await baseImageRecipe(cacheDir),
    harnesses: names,
    npm: sortedUnique(names.flatMap((h) => [...HARNESS_RECIPES[h].npm])),
    apt: sortedUnique([...names.flatMap((h) => [...HARNESS_RECIPES[h].apt]), ...(wants.apt ?? [])]),
    packages: sortedUnique(wants.npm ?? []),
  };
}

/** Known harness names, sorted and de-duplicated (none is allowed); INVALID_INPUT for any other. */
export function parseHarnesses(harnesses: readonly string[]): HarnessName[] {
  const unknown = harnesses.filter((h) => !(HARNESS_PROVIDERS as readonly string[]).includes(h));
  if (unknown.length > 0)
    throw new BerthError(
      'INVALID_INPUT',
      `Unknown harness ${unknown.join(', ')}: berth builds images with ${HARNESS_PROVIDERS.join(', ')}`,
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
    // Only when there are some: the tags of recipes without them stay what they were.
    ...(recipe.packages.length > 0 ? [recipe.packages] : []),
  ];
  return `${AGENT_IMAGE_REPO}:${sha256Hex(JSON.stringify(inputs)).slice(0, 12)}`;
}

/** The command that builds the image holding these harnesses and packages, for messages. */
export function agentImageBuildCommand(needs: AgentImageNeeds): string {
  const option = (flag: string, values: readonly string[]) =>
    values.length ? ` ${flag} ${[...new Set(values)].sort().join(',')}` : '';
  return `berth image build${option('--with', needs.harnesses)}${option('--apt', needs.apt)}${option('--npm', needs.npm)}`;
}

/** What an agent image holds (its labels): harnesses, Debian packages, the agent's npm packages. */
export type ImageContents = AgentImageNeeds;

/** What `needs` asks for that the image does not hold, each named; every need when the image does not exist. */
export function imageLacks(has: ImageContents | null, needs: AgentImageNeeds): string[] {
  const lacking = (kind: string, wanted: string[], held: string[] | undefined) =>
    wanted.filter((x) => !held?.includes(x)).map((x) => `${kind} ${x}`);
  return [
    ...lacking('harness', needs.harnesses, has?.harnesses),
    ...lacking('Debian package', needs.apt, has?.apt),
    ...lacking('npm package', needs.npm, has?.npm),
  ];
}

export async function ensureAgentImage(
  docker: Dockerode,
  opts: AgentImageWants & { cacheDir: string; onProgress?: (p: BuildProgress) => void },
): Promise<{ tag: string; built: boolean }> {
  const onProgress = opts.onProgress ?? (() => {});
  const recipe = await agentImageRecipe(opts.cacheDir, opts);
  const tag = agentImageTag(recipe);
  if (await imageExists(docker, tag)) return { tag, built: false };
  onProgress({ phase: 'npm install' });
  const harnessModules = recipe.npm.length ? await stageNpmPackages(opts.cacheDir, recipe.npm) : null;
  const packageModules = recipe.packages.length
    ? await stageNpmPackages(opts.cacheDir, recipe.packages)
    : null;
  // The Debian packages join debootstrap's --include: their root is cached like the base's.
  const rootRecipe = {
    ...recipe.base,
    packages: [...new Set([...recipe.base.packages, ...recipe.apt])].sort(),
  };
  const label = (key: string, values: string[]) =>
    values.length ? [`LABEL ${key}=${values.join(',')}`] : [];
  await buildFromDebootstrap(docker, rootRecipe, tag, opts.cacheDir, onProgress, {
    finish: async (root) => {
      if (harnessModules) await installHarnesses(root, harnessModules, recipe.harnesses, onProgress);
      if (packageModules) await installPackages(root, packageModules, recipe.packages, onProgress);
    },
    changes: [
      ...label(LABELS.harnesses, recipe.harnesses),
      ...label(LABELS.apt, recipe.apt),
      ...label(LABELS.npm, recipe.packages),
      ...(packageModules ? [`ENV NODE_PATH=${PACKAGES_PREFIX}/node_modules`] : []),
    ],
  });
  return { tag, built: true };
}

/** What an image holds by its labels, or null when the image does not exist. */
export async function imageContents(docker: Dockerode, image: string): Promise<ImageContents | null> {
  try {
    const labels = (await docker.getImage(image).inspect()).Config?.Labels ?? {};
    const list = (key: string) => (labels[key] ? labels[key].split(',') : []);
    return {
      harnesses: list(LABELS.harnesses) as HarnessName[],
      apt: list(LABELS.apt),
      npm: list(LABELS.npm),
    };
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
  await copyModules(root, modules, HARNESS_PREFIX);
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

/** The agent's npm packages into PACKAGES_PREFIX, the executables they declare linked into /usr/local/bin. */
async function installPackages(
  root: string,
  modules: string,
  packages: string[],
  onProgress: (p: BuildProgress) => void,
): Promise<void> {
  onProgress({ phase: 'add packages' });
  await copyModules(root, modules, PACKAGES_PREFIX);
  for (const spec of packages) {
    const name = spec.slice(0, spec.lastIndexOf('@'));
    for (const [bin, target] of await declaredBins(path.join(modules, name))) {
      const link = path.join(root, 'usr/local/bin', bin);
      const taken = await fs.lstat(link).then(
        () => true,
        () => false,
      );
      // Replacing node or a harness would break the sandbox; two packages with one name, the recipe.
      if (taken)
        throw new Error(`npm package ${spec}'s executable ${bin} would replace /usr/local/bin/${bin}`);
      await fs.symlink(path.posix.join(PACKAGES_PREFIX, 'node_modules', name, target), link);
      await fs.chmod(path.join(root, PACKAGES_PREFIX.slice(1), 'node_modules', name, target), 0o755);
    }
  }
}

/** The executables a package declares (package.json `bin`): [name, path in the package]. */
async function declaredBins(packageDir: string): Promise<[string, string][]> {
  const manifest = JSON.parse(await fs.readFile(path.join(packageDir, 'package.json'), 'utf8')) as {
    name: string;
    bin?: string | Record<string, string>;
  };
  const bins =
    typeof manifest.bin === 'string'
      ? { [manifest.name.replace(/^@[^/]+\//, '')]: manifest.bin }
      : (manifest.bin ?? {});
  return Object.entries(bins).map(([bin, target]) => {
    const inside = path.posix.normalize(target);
    if (
      !/^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(bin) ||
      inside.startsWith('..') ||
      path.posix.isAbsolute(inside)
    )
      throw new Error(
        `npm package ${manifest.name} declares an executable berth does not link: ${bin} -> ${target}`,
      );
    return [bin, inside];
  });
}

/** Copies staged node_modules to <prefix>/node_modules in the root, owned by root (read-only to the sandbox user). */
async function copyModules(root: string, modules: string, prefix: string): Promise<void> {
  const target = path.join(root, prefix.slice(1), 'node_modules');
  await fs.mkdir(path.dirname(target), { recursive: true });
  // cp -a keeps modes and hard links.
  await run('cp', ['-a', modules, target]);
  await run('chown', ['-R', '0:0', path.dirname(target)]);
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
