/**
 * The no-orphan invariants of the checker: once every berth process has exited, nothing of
 * the install may remain — no container labelled with it, no mount under the data dir (the
 * shared slots root included), no slot dir, no attempt layer, and no host process running
 * the workload's background `tail -f` (containers' processes are visible in /proc too).
 *
 * Invariants of this module: it only reads; one result per kind of leftover.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import { LABELS } from '../core/index.js';
import { listMounts } from '../workspace/index.js';
import { type InvariantResult, result } from './invariant-result.js';
import { BACKGROUND_COMMAND } from './workload.js';

export async function orphans(
  dataDir: string,
  installId: string,
  docker: Dockerode,
): Promise<InvariantResult[]> {
  const containers = await docker.listContainers({
    all: true,
    filters: { label: [`${LABELS.install}=${installId}`] },
  });
  const mounts = (await listMounts()).filter(
    (m) => m.mountPoint === dataDir || m.mountPoint.startsWith(`${dataDir}/`),
  );
  const slots = await readdir(join(dataDir, 'slots')).catch(() => []);
  const layers: string[] = [];
  for (const session of await readdir(join(dataDir, 'workspaces')).catch(() => [])) {
    for (const turn of await readdir(join(dataDir, 'workspaces', session, 'layers')).catch(() => []))
      layers.push(`${session}/layers/${turn}`);
  }
  const processes = await processesRunning(BACKGROUND_COMMAND);
  return [
    result(
      'no-orphan-containers',
      `containers labelled ${LABELS.install}=${installId}: ${containers.length}`,
      containers.map(
        (c) => `${(c.Names[0] ?? c.Id).replace(/^\//, '')} (${c.State}, worker ${c.Labels[LABELS.worker]})`,
      ),
    ),
    result(
      'no-orphan-mounts',
      `mounts under ${dataDir}: ${mounts.length}`,
      mounts.map((m) => `${m.mountPoint} (${m.fsType})`),
    ),
    result('no-orphan-slots', `directories under slots/: ${slots.length}`, slots),
    result('no-orphan-layers', `attempt layers under workspaces/*/layers/: ${layers.length}`, layers),
    result(
      'no-orphan-processes',
      `host processes running "${BACKGROUND_COMMAND}": ${processes.length}`,
      processes,
    ),
  ];
}

/** `pid: cmdline` of every process (any namespace: containers' too) whose command line contains `needle`. */
export async function processesRunning(needle: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const cmdline = raw.split('\0').join(' ').trim();
    if (cmdline.includes(needle)) found.push(`${pid}: ${cmdline}`);
  }
  return found;
}
