// npm packages staged on the host for an agent image: `npm install` into a directory of the
// cache, from the npm registry (the only network it needs; no container is involved).
//
// Invariants:
// - The staged directory is named by a hash of the exact package list and written through
//   a temporary directory and a rename, so a reader never sees a partial install and two
//   builds at once both end with a complete one.
// - Install scripts are not run (--ignore-scripts): the host runs no harness code.
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { moveIntoPlace, stagingPath } from '../durable-files/index.js';
import { sha256Hex } from './file-hash.js';
import { fileExists } from './files.js';
import { run } from './host-exec.js';

/** `<cacheDir>/npm-<hash>/node_modules` holding `packages` (name@version) and their dependencies. */
export async function stageNpmPackages(cacheDir: string, packages: readonly string[]): Promise<string> {
  const sorted = [...packages].sort();
  const dir = path.join(cacheDir, `npm-${sha256Hex(JSON.stringify(sorted)).slice(0, 12)}`);
  const modules = path.join(dir, 'node_modules');
  if (await fileExists(modules)) return modules;
  const partial = stagingPath(dir);
  await fs.mkdir(partial, { recursive: true });
  try {
    await fs.writeFile(path.join(partial, 'package.json'), '{"private":true}\n');
    await run('npm', [
      'install',
      '--prefix',
      partial,
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      '--no-package-lock',
      '--omit=dev',
      '--loglevel=error',
      ...sorted,
    ]);
    // Another build staged the same list first: theirs is kept.
    await moveIntoPlace(partial, dir);
  } finally {
    await fs.rm(partial, { recursive: true, force: true });
  }
  return modules;
}
