/**
 * Last-resort cleanup of a chaos run: what berth should have removed and did not. Runs only
 * after the checker recorded it as a violation, so the harness never hides a leak; it only
 * keeps one failed run from breaking the next one (or the temp dir's removal).
 *
 * Invariants: touches only containers labelled with this install and mounts under this
 * data dir (deepest first); never throws.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type Dockerode from 'dockerode';
import { LABELS } from '../core/index.js';
import { listMounts } from '../workspace/index.js';

const run = promisify(execFile);

/** What berth should have removed and did not (already reported by the checker): containers, then mounts. */
export async function removeLeftovers(docker: Dockerode, installId: string, dataDir: string): Promise<void> {
  const containers = await docker
    .listContainers({ all: true, filters: { label: [`${LABELS.install}=${installId}`] } })
    .catch(() => []);
  for (const c of containers)
    await docker
      .getContainer(c.Id)
      .remove({ force: true, v: true })
      .catch(() => undefined);
  const mounts = (await listMounts().catch(() => []))
    .map((m) => m.mountPoint)
    .filter((p) => p === dataDir || p.startsWith(`${dataDir}/`))
    .sort((a, b) => b.length - a.length);
  for (const p of mounts) await run('umount', ['-l', p]).catch(() => undefined);
}
