/**
 * Stages the compiled runner for mounting into sandboxes: runner/*.js, the one core
 * module it imports (core/protocol.js, which has no imports of its own), and a
 * package.json marking them ESM. The runner needs nothing from node_modules, and the
 * sandbox sees none of the host's other code.
 */
import { copyFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const COMPILED_SRC = fileURLToPath(new URL('../', import.meta.url));

/** Path of the runner's entry inside the staged directory. */
export const RUNNER_ENTRY = 'runner/main.js';

export async function stageRunner(targetDir: string): Promise<string> {
  await rm(targetDir, { recursive: true, force: true });
  await mkdir(join(targetDir, 'runner'), { recursive: true, mode: 0o755 });
  await mkdir(join(targetDir, 'core'), { recursive: true, mode: 0o755 });
  for (const file of await readdir(join(COMPILED_SRC, 'runner'))) {
    if (file.endsWith('.js') && !file.endsWith('.test.js')) {
      await copyFile(join(COMPILED_SRC, 'runner', file), join(targetDir, 'runner', file));
    }
  }
  await copyFile(join(COMPILED_SRC, 'core', 'protocol.js'), join(targetDir, 'core', 'protocol.js'));
  await writeFile(join(targetDir, 'package.json'), '{"type":"module"}\n', { mode: 0o644 });
  return targetDir;
}
