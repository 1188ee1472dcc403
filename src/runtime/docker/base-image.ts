// The sandbox base image `berth-base:<hash>`: a Debian minbase root with procps, the host's
// node binary at /usr/local/bin/node, user `berth` (1000:1000), /workspace, /opt/berth and
// /run/berth; PATH, USER 1000:1000 and WORKDIR /workspace set in the image config.
//
// Invariants:
// - The tag is a pure function of the recipe (suite, variant, packages, node binary content,
//   RECIPE_VERSION). It names the recipe, not the package versions a build happened to fetch:
//   bump RECIPE_VERSION to pick up a Debian point release or any change to the build steps below.
// - `ensureBaseImage` never rebuilds an existing tag, and builds only with local means: the default
//   path runs debootstrap on the host (Debian's package mirror is the only network it needs) and
//   imports the root as a single layer, so no registry and no container network are involved.
// - The debootstrapped and customised root (everything but node) is cached as a tarball keyed by
//   suite + variant + packages + RECIPE_VERSION, so a new node binary costs an import, not a
//   debootstrap. Cache files are written under a temporary name and renamed into place.
// - Every child process gets an argv array; nothing goes through a shell. The work directory is
//   removed on every exit path, after unmounting anything debootstrap may have left inside it.
// - Two concurrent builds of the same tag both succeed; the last import wins the tag. Their
//   roots are identical but for mtimes, so nothing depends on which one that is.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import * as fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type Dockerode from 'dockerode';

const execFileAsync = promisify(execFile);

/** Bump when a build step below changes; it invalidates both the tag and the rootfs cache. */
export const RECIPE_VERSION = 1;
export const BASE_IMAGE_REPO = 'berth-base';
const DEFAULT_MIRROR = 'http://deb.debian.org/debian';
const SANDBOX_UID = 1000;
const SANDBOX_GID = 1000;
/** Image config applied at import; the Dockerfile path sets the same three. */
const IMAGE_CHANGES = ['ENV PATH=/usr/local/bin:/usr/bin:/bin', 'USER 1000:1000', 'WORKDIR /workspace'];
/** image/Dockerfile, found from dist/src/runtime/docker/ and from src/runtime/docker/ alike. */
const IMAGE_DIR = fileURLToPath(new URL('../../../../image/', import.meta.url));

export interface BaseImageRecipe {
  recipeVersion: number;
  suite: string;
  variant: 'minbase';
  packages: readonly string[];
  nodePath: string;
  nodeSha256: string;
}

export interface BuildProgress {
  phase: string;
  done?: number;
  total?: number;
}

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

async function imageExists(docker: Dockerode, tag: string): Promise<boolean> {
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

// ---------------------------------------------------------------- node binary hash cache

interface HashCacheEntry {
  size: number;
  mtimeMs: number;
  sha256: string;
}

/** sha256 of a file, remembered in `<cacheDir>/node-sha256.json` under (path, size, mtimeMs). */
async function cachedSha256(file: string, cacheDir: string): Promise<string> {
  const st = await fs.stat(file);
  const cacheFile = path.join(cacheDir, 'node-sha256.json');
  const cache = await readHashCache(cacheFile);
  const hit = cache[file];
  if (hit && hit.size === st.size && hit.mtimeMs === st.mtimeMs) return hit.sha256;
  const sha256 = await sha256File(file);
  cache[file] = { size: st.size, mtimeMs: st.mtimeMs, sha256 };
  await fs.mkdir(cacheDir, { recursive: true });
  await writeFileAtomic(cacheFile, `${JSON.stringify(cache, null, 2)}\n`);
  return sha256;
}

async function readHashCache(cacheFile: string): Promise<Record<string, HashCacheEntry>> {
  try {
    const parsed: unknown = JSON.parse(await fs.readFile(cacheFile, 'utf8'));
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      return parsed as Record<string, HashCacheEntry>;
    }
  } catch {
    // Missing or corrupt: the cache is only an optimisation, start over.
  }
  return {};
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return hash.digest('hex');
}

/** Unique per writer, even for concurrent writers in one process. */
function uniqueSuffix(): string {
  return `${process.pid}-${randomBytes(4).toString('hex')}`;
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

async function writeFileAtomic(file: string, data: string): Promise<void> {
  const tmp = `${file}.${uniqueSuffix()}.tmp`;
  await fs.writeFile(tmp, data);
  await fs.rename(tmp, file);
}

// ---------------------------------------------------------------- offline build (debootstrap)

async function buildFromDebootstrap(
  docker: Dockerode,
  recipe: BaseImageRecipe,
  tag: string,
  cacheDir: string,
  onProgress: (p: BuildProgress) => void,
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
      const partial = `${cachedRootfs}.${uniqueSuffix()}.partial`;
      try {
        await run('tar', ['-C', root, '--numeric-owner', '-c', '-f', partial, '.']);
        await fs.rename(partial, cachedRootfs);
      } finally {
        await fs.rm(partial, { force: true });
      }
    }
    onProgress({ phase: 'add node' });
    await installNode(recipe, root);
    onProgress({ phase: 'import' });
    await importRootfs(docker, root, tag, onProgress);
  } finally {
    await removeWorkDir(work);
  }
}

function rootfsCacheKey(recipe: BaseImageRecipe): string {
  const inputs = [recipe.recipeVersion, recipe.suite, recipe.variant, [...recipe.packages].sort()];
  return sha256Hex(JSON.stringify(inputs)).slice(0, 12);
}

async function ensureDebootstrap(onProgress: (p: BuildProgress) => void): Promise<string> {
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

/** The host's Debian mirror for `suite` from its apt sources, so the build uses the same (reachable) one. */
async function debianMirror(suite: string): Promise<string> {
  const files = ['/etc/apt/sources.list'];
  try {
    const dir = '/etc/apt/sources.list.d';
    const names = (await fs.readdir(dir)).filter((n) => n.endsWith('.list') || n.endsWith('.sources'));
    files.push(...names.sort().map((n) => path.join(dir, n)));
  } catch {
    // no sources.list.d
  }
  const sources: AptSourceFile[] = [];
  for (const file of files) {
    try {
      sources.push({ deb822: file.endsWith('.sources'), text: await fs.readFile(file, 'utf8') });
    } catch {
      // unreadable or missing: skip it
    }
  }
  return parseAptMirror(sources, suite) ?? DEFAULT_MIRROR;
}

export interface AptSourceFile {
  /** true for `.sources` (deb822 stanzas), false for one-line `.list` syntax */
  deb822: boolean;
  text: string;
}

/** First enabled `deb` source of `suite` with component main and an http(s)/file URI. */
export function parseAptMirror(files: readonly AptSourceFile[], suite: string): string | undefined {
  const usable = (uri: string) => /^(https?|file):/.test(uri);
  for (const file of files) {
    if (file.deb822) {
      for (const stanza of file.text.split(/\n\s*\n/)) {
        const fields = parseDeb822Stanza(stanza);
        const list = (name: string) => (fields.get(name) ?? '').split(/\s+/).filter(Boolean);
        if (fields.get('enabled')?.toLowerCase() === 'no') continue;
        if (!list('types').includes('deb') || !list('suites').includes(suite)) continue;
        if (!list('components').includes('main')) continue;
        const uri = list('uris').find(usable);
        if (uri) return uri.replace(/\/+$/, '');
      }
    } else {
      for (const raw of file.text.split('\n')) {
        const line = raw.replace(/#.*/, '').replace(/\[[^\]]*\]/, ' ');
        const [type, uri, lineSuite, ...components] = line.trim().split(/\s+/);
        if (type === 'deb' && uri && usable(uri) && lineSuite === suite && components.includes('main')) {
          return uri.replace(/\/+$/, '');
        }
      }
    }
  }
  return undefined;
}

function parseDeb822Stanza(stanza: string): Map<string, string> {
  const fields = new Map<string, string>();
  let current: string | undefined;
  for (const line of stanza.split('\n')) {
    if (line.startsWith('#')) continue;
    if (/^\s/.test(line) && current) {
      fields.set(current, `${fields.get(current)} ${line.trim()}`);
      continue;
    }
    const match = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
    if (match) {
      current = match[1]!.toLowerCase();
      fields.set(current, match[2]!.trim());
    }
  }
  return fields;
}

async function runDebootstrap(
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

/** Sandbox user and directories, and removal of what a sandbox never needs. */
async function customizeRootfs(root: string): Promise<void> {
  const at = (p: string) => path.join(root, p);
  await appendLine(at('etc/passwd'), `berth:x:${SANDBOX_UID}:${SANDBOX_GID}:berth:/tmp:/bin/sh`, 'berth');
  await appendLine(at('etc/group'), `berth:x:${SANDBOX_GID}:`, 'berth');
  await fs.mkdir(at('workspace'), { mode: 0o755 });
  await fs.chown(at('workspace'), SANDBOX_UID, SANDBOX_GID);
  await fs.chmod(at('workspace'), 0o755);
  await fs.mkdir(at('opt/berth'), { recursive: true, mode: 0o755 });
  await fs.mkdir(at('run/berth'), { recursive: true, mode: 0o755 });

  // Downloaded .debs and package lists (~80 MB) are useless in a read-only sandbox without network.
  await removeChildren(at('var/cache/apt'));
  await removeChildren(at('var/lib/apt/lists'));
  await fs.mkdir(at('var/cache/apt/archives/partial'), { recursive: true });
  await fs.mkdir(at('var/lib/apt/lists/partial'), { recursive: true });
  // Documentation and translations (~50 MB). The copyright files stay: the image is redistributable.
  await removeDocsKeepingCopyright(at('usr/share/doc'));
  for (const dir of ['usr/share/man', 'usr/share/info', 'usr/share/locale', 'usr/share/lintian']) {
    await removeChildren(at(dir));
  }
  // Build logs and debconf backups; host facts debootstrap copied in (Docker provides its own
  // /etc/hostname, /etc/resolv.conf and a /dev tmpfs, and device nodes in a layer trouble some
  // storage drivers).
  await removeChildren(at('var/log'), (name) => name.endsWith('.log') || name === 'apt');
  await removeChildren(at('var/cache/debconf'), (name) => name.endsWith('-old'));
  await removeChildren(at('dev'));
  await fs.rm(at('etc/hostname'), { force: true });
  await fs.rm(at('etc/resolv.conf'), { force: true });
}

async function appendLine(file: string, line: string, name: string): Promise<void> {
  const text = await fs.readFile(file, 'utf8');
  if (text.split('\n').some((l) => l.startsWith(`${name}:`))) {
    throw new Error(
      `${file} already has an entry named ${name}; bump RECIPE_VERSION after fixing the recipe.`,
    );
  }
  await fs.writeFile(file, `${text}${text.endsWith('\n') || text === '' ? '' : '\n'}${line}\n`);
}

async function removeChildren(dir: string, select: (name: string) => boolean = () => true): Promise<void> {
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch {
    return;
  }
  for (const name of names.filter(select))
    await fs.rm(path.join(dir, name), { recursive: true, force: true });
}

async function removeDocsKeepingCopyright(docDir: string): Promise<void> {
  let packages: string[];
  try {
    packages = await fs.readdir(docDir);
  } catch {
    return;
  }
  for (const pkg of packages) {
    const dir = path.join(docDir, pkg);
    const st = await fs.lstat(dir);
    if (st.isDirectory()) await removeChildren(dir, (name) => name !== 'copyright');
  }
}

/** Copies node into the root, hashing the copy so the image cannot hold a binary the tag does not name. */
async function installNode(recipe: BaseImageRecipe, root: string): Promise<void> {
  const target = path.join(root, 'usr/local/bin/node');
  await fs.mkdir(path.dirname(target), { recursive: true });
  const hash = createHash('sha256');
  const tee = new Transform({
    transform(chunk, _enc, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
  await pipeline(createReadStream(recipe.nodePath), tee, createWriteStream(target, { mode: 0o755 }));
  await fs.chmod(target, 0o755);
  if (hash.digest('hex') !== recipe.nodeSha256) {
    throw new Error(`${recipe.nodePath} changed while the base image was being built; run the build again.`);
  }
  // Proves the host binary runs on this root (glibc, libstdc++) before a broken image gets a tag.
  try {
    await run('chroot', [root, '/usr/local/bin/node', '-e', '0']);
  } catch (err) {
    throw new Error(
      `${recipe.nodePath} does not run inside a Debian ${recipe.suite} root (${errorText(err)}). ` +
        'Use a glibc build of Node.js 20 (e.g. nodesource or the official tarball).',
      { cause: err },
    );
  }
}

/** Streams `tar -C root -c .` into POST /images/create?fromSrc=- and waits for the engine's verdict. */
async function importRootfs(
  docker: Dockerode,
  root: string,
  tag: string,
  onProgress: (p: BuildProgress) => void,
): Promise<void> {
  const totalMiB = Math.ceil((await estimateTarBytes(root)) / 2 ** 20);
  const tar = spawn('tar', ['-C', root, '--numeric-owner', '-c', '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const tarStderr: string[] = [];
  tar.stderr!.on('data', (chunk: Buffer) => tarStderr.push(chunk.toString()));
  const tarDone = exitCode(tar);
  // Awaited below; this only keeps a spawn error that fires first from counting as unhandled.
  tarDone.catch(() => {});
  let bytes = 0;
  let lastMiB = -1;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      const mib = Math.floor(bytes / 2 ** 20);
      if (mib !== lastMiB) {
        lastMiB = mib;
        onProgress({ phase: 'import MiB', done: Math.min(mib, totalMiB), total: totalMiB });
      }
      done(null, chunk);
    },
  });
  tar.stdout!.pipe(counter);
  const [repo, version] = tag.split(':') as [string, string];
  try {
    const response = await docker.importImage(counter, { repo, tag: version, changes: IMAGE_CHANGES });
    await followJsonStream(response, () => {});
  } catch (err) {
    tar.kill('SIGKILL');
    await tarDone;
    throw new Error(`Docker could not import the base image root as ${tag}: ${errorText(err)}`, {
      cause: err,
    });
  }
  const code = await tarDone;
  if (code !== 0) {
    throw new Error(`tar of the base image root failed with exit code ${code}: ${tarStderr.join('').trim()}`);
  }
}

/** Size of the tar stream, close enough for a progress bar: a header and padded data per inode. */
async function estimateTarBytes(root: string): Promise<number> {
  const seen = new Set<string>();
  let bytes = 1024;
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      const st = await fs.lstat(p);
      bytes += 512;
      const inode = `${st.dev}:${st.ino}`;
      if (st.isFile() && !seen.has(inode)) {
        seen.add(inode);
        bytes += Math.ceil(st.size / 512) * 512;
      }
      if (entry.isDirectory()) await walk(p);
    }
  };
  await walk(root);
  return bytes;
}

/** Reads a JSON-lines progress stream of the Engine API; rejects on its first `error` line. */
async function followJsonStream(
  stream: NodeJS.ReadableStream,
  onLine: (line: Record<string, unknown>) => void,
): Promise<void> {
  for await (const text of createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY })) {
    if (!text.trim()) continue;
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      continue; // the engine interleaves nothing else, but a stray line must not mask the result
    }
    if (line.error !== undefined || line.errorDetail !== undefined) {
      const detail = line.errorDetail as { message?: string } | undefined;
      throw new Error(String(detail?.message ?? line.error));
    }
    onLine(line);
  }
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

// ---------------------------------------------------------------- registry build (Dockerfile)

/**
 * For machines with a registry: image/Dockerfile on node:20-bookworm-slim. It meets the same
 * contract as the offline build and gets the same tag, so the runtime needs no setting to know
 * how its base image was made; its node is the image's Node 20, not the host binary.
 */
async function buildFromDockerfile(
  docker: Dockerode,
  tag: string,
  onProgress: (p: BuildProgress) => void,
): Promise<void> {
  onProgress({ phase: 'docker build' });
  try {
    const response = await docker.buildImage(
      { context: IMAGE_DIR, src: ['Dockerfile'] },
      { t: tag, rm: true },
    );
    await followJsonStream(response, (line) => {
      const step = /^Step (\d+)\/(\d+)/.exec(String(line.stream ?? ''));
      if (step) onProgress({ phase: 'docker build', done: Number(step[1]) - 1, total: Number(step[2]) });
    });
  } catch (err) {
    const text = errorText(err);
    const registry = /pull|registry|manifest|dial tcp|lookup|timeout|TLS|connection refused|no such host/i;
    const reason = registry.test(text) ? 'the container registry is unreachable' : 'the build failed';
    throw new Error(
      `Cannot build ${tag} from image/Dockerfile: ${reason} (${text}). The default offline build ` +
        '(`berth image build`, debootstrap) needs no registry.',
      { cause: err },
    );
  }
}

// ---------------------------------------------------------------- process helpers

async function run(
  file: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv } = {},
): Promise<void> {
  try {
    await execFileAsync(file, args, { env: opts.env, maxBuffer: 64 * 2 ** 20 });
  } catch (err) {
    const e = err as { code?: unknown; stderr?: string };
    const stderr = (e.stderr ?? '').trim().split('\n').slice(-10).join('\n');
    throw new Error(`${file} ${args.join(' ')} failed (exit ${String(e.code)}): ${stderr}`, { cause: err });
  }
}

function exitCode(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

async function fileExists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
