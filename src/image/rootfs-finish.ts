// What berth changes in a debootstrapped root: the sandbox user and directories, removal of what
// a read-only, network-less sandbox never needs, every setuid and setgid bit, and the host's
// node binary.
//
// Invariants:
// - `customizeRootfs` depends only on the recipe's Debian inputs, so its result can be cached;
//   node is added afterwards by `installNode`, outside that cache.
// - The user `berth` is 1000:1000 and owns /workspace; adding it twice is an error (the recipe
//   changed without a RECIPE_VERSION bump). Copyright files are kept: the image is redistributable.
// - `installNode` hashes the bytes it copies and rejects if they differ from the recipe's
//   nodeSha256, then runs the copy in the root, so no image gets a tag its node does not match or
//   a node that cannot run.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BaseImageRecipe } from './base-image-recipe.js';
import { errorText, run } from './host-exec.js';

const SANDBOX_UID = 1000;
const SANDBOX_GID = 1000;

/** Sandbox user and directories, and removal of what a sandbox never needs. */
export async function customizeRootfs(root: string): Promise<void> {
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
  // setuid/setgid programs (passwd, su, mount, …) are inert under no-new-privileges; without the bits
  // they stay inert if that flag is ever lost.
  await stripSetIdBits(root);
}

/** Clears every setuid and setgid bit under `dir` (symlinks are not followed). */
async function stripSetIdBits(dir: string): Promise<void> {
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    const { mode } = await fs.lstat(full);
    if (mode & 0o6000) await fs.chmod(full, mode & 0o1777);
    if (entry.isDirectory()) await stripSetIdBits(full);
  }
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
export async function installNode(recipe: BaseImageRecipe, root: string): Promise<void> {
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
