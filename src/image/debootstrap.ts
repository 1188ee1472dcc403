// debootstrap itself: finding it (installing it with apt-get on Debian if missing), running it
// into a root, and turning its output into progress events.
//
// Invariants:
// - debootstrap runs with an argv array, stdin ignored; on a non-zero exit the error carries the
//   suite, the mirror and the last 20 lines of its output.
// - `createDebootstrapProgressParser` is pure but for its own counters: one parser per run.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { BaseImageRecipe, BuildProgress } from './base-image-recipe.js';
import { fileExists } from './files.js';
import { exitCode, run } from './host-exec.js';

export async function ensureDebootstrap(onProgress: (p: BuildProgress) => void): Promise<string> {
  const found = await findExecutable('debootstrap');
  if (found) return found;
  if (!(await fileExists('/etc/debian_version'))) {
    throw new Error(
      'debootstrap is not installed and this is not Debian: install debootstrap with your package ' +
        'manager, or use `berth image build --from dockerfile` with a reachable registry.',
    );
  }
  onProgress({ phase: 'install debootstrap' });
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Recommends would pull in gnupg; the keyring is the one recommend that matters, because without
  // it debootstrap cannot verify the mirror's Release signature (gpgv itself is always installed).
  const packages = ['debootstrap', 'debian-archive-keyring'];
  const install = ['apt-get', ['install', '-y', '--no-install-recommends', ...packages]] as const;
  try {
    await run(...install, { env });
  } catch {
    // A fresh machine may have empty package lists; refresh them once and retry.
    await run('apt-get', ['update'], { env });
    await run(...install, { env });
  }
  const installed = await findExecutable('debootstrap');
  if (!installed) throw new Error('apt-get installed debootstrap but it is not on PATH or in /usr/sbin.');
  return installed;
}

async function findExecutable(name: string): Promise<string | undefined> {
  // sbin is often missing from PATH under sudo or for non-login shells; debootstrap lives there.
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/sbin'];
  for (const dir of dirs.filter(Boolean)) {
    const candidate = path.join(dir, name);
    try {
      await fs.access(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

export async function runDebootstrap(
  debootstrap: string,
  recipe: BaseImageRecipe,
  root: string,
  mirror: string,
  onProgress: (p: BuildProgress) => void,
): Promise<void> {
  const args = [
    `--variant=${recipe.variant}`,
    `--include=${recipe.packages.join(',')}`,
    recipe.suite,
    root,
    mirror,
  ];
  const parse = createDebootstrapProgressParser();
  const child = spawn(debootstrap, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const tail: string[] = [];
  const onLine = (line: string) => {
    tail.push(line);
    if (tail.length > 20) tail.shift();
    const event = parse(line);
    if (event) onProgress(event);
  };
  createInterface({ input: child.stdout! }).on('line', onLine);
  createInterface({ input: child.stderr! }).on('line', onLine);
  const code = await exitCode(child);
  if (code !== 0) {
    throw new Error(
      `debootstrap ${recipe.suite} from ${mirror} failed with exit code ${code}. Check that the mirror ` +
        `is reachable (it is read from /etc/apt/sources*). Last output:\n${tail.join('\n')}`,
    );
  }
}

/**
 * Turns debootstrap's `I:` lines into counted phases. debootstrap prints no package total before
 * downloading, so `download` and `extract` (which covers only the required subset) count up
 * without a total; `unpack` and `configure` cover every downloaded package, so their total is
 * the download count. Package names are de-duplicated because libc-bin is configured twice.
 */
export function createDebootstrapProgressParser(): (line: string) => BuildProgress | undefined {
  let downloaded = 0;
  let extracted = 0;
  const unpacked = new Set<string>();
  const configured = new Set<string>();
  return (line) => {
    // Fetching the indices and resolving dependencies take a while before the first package.
    if (/^I: Retrieving (InRelease|Release|Packages)\s*$/.test(line)) return { phase: 'index' };
    if (line.startsWith('I: Resolving dependencies')) return { phase: 'resolve' };
    // `I: Retrieving adduser 3.134`; the index files (`Retrieving InRelease `) have no version.
    const retrieving = /^I: Retrieving (\S+) (\S+)$/.exec(line.trimEnd());
    if (retrieving) return { phase: 'download', done: ++downloaded };
    if (/^I: Extracting \S+\.\.\.$/.test(line)) return { phase: 'extract', done: ++extracted };
    // Section headers (`I: Unpacking required packages...`) contain spaces and do not match.
    const step = /^I: (Unpacking|Configuring) ([^\s:]+)(:\S+)?\.\.\.$/.exec(line);
    if (!step) return undefined;
    const [phase, seen] = step[1] === 'Unpacking' ? ['unpack', unpacked] : ['configure', configured];
    seen.add(step[2]!);
    return { phase, done: Math.min(seen.size, downloaded), total: downloaded };
  };
}
