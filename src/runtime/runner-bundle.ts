/**
 * Stages the compiled runner for mounting into sandboxes: runner/*.js, the one core
 * module it imports (core/protocol.js, which has no imports of its own), and a
 * package.json marking them ESM. The runner needs nothing from node_modules, and the
 * sandbox sees none of the host's other code.
 *
 * Content-addressed (<base>/<hash>/) and written through a temp dir and a rename: a
 * worker starting beside running sandboxes never touches the files they have mounted,
 * and two workers staging at once both end with the same complete directory.
 */
import { createHash, randomBytes } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const COMPILED_SRC = fileURLToPath(new URL('../', import.meta.url));

/** Path of the runner's entry inside the staged directory. */
export const RUNNER_ENTRY = 'runner/main.js';

const PACKAGE_JSON = '{"type":"module"}\n';

/** Returns the staged directory for the current runner code under `baseDir`. */
export async function stageRunner(baseDir: string): Promise<string> {
  const runnerFiles = (await readdir(join(COMPILED_SRC, 'runner')))
    .filter((f) => f.endsWith('.js') && !f.endsWith('.test.js'))
    .sort()
    .map((f) => `runner/${f}`);
  const files = [...runnerFiles, 'core/protocol.js'];
  const hash = createHash('sha256').update(PACKAGE_JSON);
  for (const file of files) hash.update(file).update(await readFile(join(COMPILED_SRC, file)));
  const target = join(baseDir, hash.digest('hex').slice(0, 16));
  if (
    await stat(target).then(
      () => true,
      () => false,
    )
  )
    return target;

  const tmp = join(baseDir, `.staging-${randomBytes(6).toString('hex')}`);
  await mkdir(join(tmp, 'runner'), { recursive: true, mode: 0o755 });
  await mkdir(join(tmp, 'core'), { recursive: true, mode: 0o755 });
  for (const file of files) await copyFile(join(COMPILED_SRC, file), join(tmp, file));
  await writeFile(join(tmp, 'package.json'), PACKAGE_JSON, { mode: 0o644 });
  try {
    await rename(tmp, target);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EEXIST' && code !== 'ENOTEMPTY') throw err;
    await rm(tmp, { recursive: true, force: true }); // another worker staged the same code first
  }
  return target;
}
