/**
 * Stages the compiled runner for mounting into sandboxes: runner/*.js, bin/ (the commands
 * a job finds on its PATH, e.g. berth-checkpoint), the core modules
 * it imports (core/protocol.js, core/retry.js and theirs: no others), a package.json
 * marking them ESM, and node_modules/ with the packages the runner imports (the model
 * SDKs) and their dependencies, copied from the host's node_modules in the same layout
 * without type declarations, source maps or TypeScript sources. The sandbox sees none of
 * the host's other code.
 *
 * Content-addressed (<base>/<hash>/) and written through a temp dir and a rename: a
 * worker starting beside running sandboxes never touches the files they have mounted,
 * and two workers staging at once both end with the same complete directory.
 */
import { createHash } from 'node:crypto';
import { chmod, copyFile, cp, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, posix, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { moveIntoPlace, stagingPath } from '../durable-files/index.js';

const COMPILED_SRC = fileURLToPath(new URL('../', import.meta.url));

/** Path of the runner's entry inside the staged directory. */
export const RUNNER_ENTRY = 'runner/main.js';

const PACKAGE_JSON = '{"type":"module"}\n';

/**
 * Commands a job finds on its PATH (the runner puts bin/ first): each a shell script
 * running its runner module with the sandbox's node, found from the script's own place.
 */
const COMMANDS: Record<string, string> = {
  'berth-checkpoint': 'runner/checkpoint-command.js',
};

function commandScript(module: string): string {
  return `#!/bin/sh\nexec node "$(dirname "$0")/../${module}" "$@"\n`;
}

/** Returns the staged directory for the current runner code under `baseDir`. */
export async function stageRunner(baseDir: string): Promise<string> {
  const runnerFiles = (await readdir(join(COMPILED_SRC, 'runner')))
    .filter((f) => f.endsWith('.js') && !f.endsWith('.test.js'))
    .sort()
    .map((f) => `runner/${f}`);
  const files = await withCoreImports(runnerFiles);
  const packages = await runnerPackages(files);
  const hash = createHash('sha256').update(PACKAGE_JSON).update(PACKAGE_FILTER_VERSION);
  for (const [name, module] of Object.entries(COMMANDS)) hash.update(name).update(commandScript(module));
  for (const file of files) hash.update(file).update(await readFile(join(COMPILED_SRC, file)));
  // A published package version never changes: name, place and version stand for its files.
  for (const p of packages) hash.update(`${p.staged}@${p.version}`);
  const target = join(baseDir, hash.digest('hex').slice(0, 16));
  if (
    await stat(target).then(
      () => true,
      () => false,
    )
  )
    return target;

  const tmp = stagingPath(target, 'staging');
  await mkdir(join(tmp, 'runner'), { recursive: true, mode: 0o755 });
  await mkdir(join(tmp, 'core'), { recursive: true, mode: 0o755 });
  for (const file of files) await copyFile(join(COMPILED_SRC, file), join(tmp, file));
  await writeFile(join(tmp, 'package.json'), PACKAGE_JSON, { mode: 0o644 });
  await mkdir(join(tmp, 'bin'), { mode: 0o755 });
  for (const [name, module] of Object.entries(COMMANDS)) {
    await writeFile(join(tmp, 'bin', name), commandScript(module));
    await chmod(join(tmp, 'bin', name), 0o755);
  }
  for (const p of packages) {
    await cp(p.hostDir, join(tmp, p.staged), {
      recursive: true,
      // Nested node_modules are staged as packages of their own, only when needed.
      filter: (src) => src === p.hostDir || !(basename(src) === 'node_modules' || SKIPPED_FILE.test(src)),
    });
  }
  // false: another worker staged the same code first; its copy is the same.
  await moveIntoPlace(tmp, target);
  return target;
}

/**
 * The runner's files and every core module they import, directly or through another core
 * module (relative imports of compiled code, found by their `from '…'`): only what it loads.
 */
async function withCoreImports(runnerFiles: string[]): Promise<string[]> {
  const files = new Set(runnerFiles);
  const queue = [...runnerFiles];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    const code = await readFile(join(COMPILED_SRC, file), 'utf8');
    for (const m of code.matchAll(/\bfrom\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = posix.normalize(posix.join(posix.dirname(file), m[1]!));
      if (files.has(target)) continue;
      if (!target.startsWith('core/'))
        throw new Error(`The runner imports ${target} (from ${file}): it may import only core/ modules`);
      files.add(target);
      queue.push(target);
    }
  }
  return [...files].sort();
}

/** Bump when the choice of copied files changes: the staged content changes with it. */
const PACKAGE_FILTER_VERSION = 'packages-v1';
/** What the runner never loads: type declarations, source maps, TypeScript sources, docs. */
const SKIPPED_FILE = /(\.d\.[cm]?ts|\.[cm]?ts|\.map|\.md)$/;

interface StagedPackage {
  hostDir: string;
  /** Path inside the staged dir, mirroring the host's layout from its top node_modules. */
  staged: string;
  version: string;
}

/** The packages the runner's files import (bare specifiers), with their dependencies, transitively. */
async function runnerPackages(files: string[]): Promise<StagedPackage[]> {
  const imported = new Set<string>();
  for (const file of files) {
    const code = await readFile(join(COMPILED_SRC, file), 'utf8');
    for (const m of code.matchAll(/(?:\bfrom|\bimport\s*\()\s*['"]([^'"./][^'"]*)['"]/g)) {
      const specifier = m[1]!;
      if (specifier.startsWith('node:')) continue;
      const parts = specifier.split('/');
      imported.add(specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!);
    }
  }
  const found = new Map<string, StagedPackage>();
  const visit = async (name: string, fromDir: string, optional: boolean): Promise<void> => {
    const hostDir = await findPackage(name, fromDir);
    if (!hostDir) {
      if (optional) return;
      throw new Error(`The runner needs package ${name}, which is not installed (run npm ci)`);
    }
    if (found.has(hostDir)) return;
    const manifest = JSON.parse(await readFile(join(hostDir, 'package.json'), 'utf8')) as {
      version: string;
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    const staged = hostDir.slice(hostDir.indexOf(`${sep}node_modules${sep}`) + 1);
    found.set(hostDir, { hostDir, staged, version: manifest.version });
    for (const dep of Object.keys(manifest.dependencies ?? {})) await visit(dep, hostDir, false);
    for (const dep of Object.keys(manifest.optionalDependencies ?? {})) await visit(dep, hostDir, true);
  };
  for (const name of [...imported].sort()) await visit(name, COMPILED_SRC, false);
  return [...found.values()].sort((a, b) => a.staged.localeCompare(b.staged));
}

/** Node's lookup: <dir>/node_modules/<name>, from `fromDir` up to the root. */
async function findPackage(name: string, fromDir: string): Promise<string | null> {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (
      await stat(join(candidate, 'package.json')).then(
        () => true,
        () => false,
      )
    )
      return candidate;
    if (dirname(dir) === dir) return null;
  }
}
