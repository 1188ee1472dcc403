// Imports a finished root into the engine as a single-layer image: `tar -C root -c .` streamed
// into POST /images/create?fromSrc=-, with the image config set and MiB progress reported.
//
// Invariants:
// - The tar stream carries numeric owners only, so ownership in the image is exactly the root's
//   uids and gids, whatever names the host gives them.
// - The import fails if either side fails: an engine error kills tar, and a failed tar fails the
//   import even when the engine accepted the stream.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import type Dockerode from 'dockerode';
import type { BuildProgress } from './base-image-recipe.js';
import { followJsonStream } from './engine-stream.js';
import { errorText, exitCode } from './host-exec.js';

/** Image config applied at import; the Dockerfile path sets the same three. */
const IMAGE_CHANGES = ['ENV PATH=/usr/local/bin:/usr/bin:/bin', 'USER 1000:1000', 'WORKDIR /workspace'];

/** Streams `tar -C root -c .` into POST /images/create?fromSrc=- and waits for the engine's verdict. */
export async function importRootfs(
  docker: Dockerode,
  root: string,
  tag: string,
  onProgress: (p: BuildProgress) => void,
  /** More config lines (LABEL …) on top of IMAGE_CHANGES. */
  extraChanges: readonly string[] = [],
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
    const changes = [...IMAGE_CHANGES, ...extraChanges];
    const response = await docker.importImage(counter, { repo, tag: version, changes });
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
