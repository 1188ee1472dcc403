/**
 * The no-orphan invariants of the checker: once every berth process has exited, nothing of
 * the install may remain — no container labelled with it, no mount under the data dir (the
 * shared slots root included), no slot dir, no sandbox run dir, no attempt layer, and no
 * process running the workload's background `tail -f` (containers' processes are visible
 * in /proc too; one inside another install's container is that install's, not this one's).
 *
 * Where to look comes from the layouts berth itself writes by (workspace/layout.ts,
 * worker/paths.ts), so a layout change moves the checker with it. A dir the run's workers
 * always create (slots/, workspaces/, run/) must be there: its absence means the checker
 * looks in the wrong place, and fails. Only a session's layers dir may be absent (no turn of
 * it was ever mounted), and those dirs on a machine where no worker ran (the API's, in a run
 * on nodes). Any other error reading a dir fails the invariant that reads it.
 *
 * Invariants of this module: it only reads; one result per kind of leftover.
 */
import { readdir, readFile } from 'node:fs/promises';
import type Dockerode from 'dockerode';
import { LABELS } from '../core/index.js';
import { hostPaths } from '../worker/index.js';
import { listMounts, workspaceLayout } from '../workspace/index.js';
import { type InvariantResult, result } from './invariant-result.js';
import { BACKGROUND_COMMAND } from './workload.js';

export async function orphans(
  dataDir: string,
  installId: string,
  docker: Dockerode,
  workerDirs: 'required' | 'may-be-absent' = 'required',
): Promise<InvariantResult[]> {
  const layout = workspaceLayout(dataDir);
  const { runDir } = hostPaths(dataDir);
  const containers = await docker.listContainers({
    all: true,
    filters: { label: [`${LABELS.install}=${installId}`] },
  });
  const mounts = (await listMounts()).filter(
    (m) => m.mountPoint === dataDir || m.mountPoint.startsWith(`${dataDir}/`),
  );
  const slots = await entries(layout.slotsDir, workerDirs);
  const runDirs = await entries(runDir, workerDirs);
  const sessions = await entries(layout.sessionsDir, workerDirs);
  const layers: Listing = { names: [], errors: [...sessions.errors] };
  for (const session of sessions.names) {
    const turns = await entries(layout.layersDir(session), 'may-be-absent');
    layers.names.push(...turns.names.map((turn) => layout.layerPath(session, turn)));
    layers.errors.push(...turns.errors);
  }
  const processes = await processesRunning(BACKGROUND_COMMAND, new Set(containers.map((c) => c.Id)));
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
    listed('no-orphan-slots', `slot dirs under ${layout.slotsDir}`, slots),
    listed('no-orphan-run-dirs', `sandbox run dirs under ${runDir}`, runDirs),
    listed('no-orphan-layers', `attempt layers under ${layout.sessionsDir}/*/layers`, layers),
    result(
      'no-orphan-processes',
      `processes of this install running "${BACKGROUND_COMMAND}": ${processes.found.length}`,
      [...processes.found, ...processes.errors],
    ),
  ];
}

interface Listing {
  names: string[];
  /** Why the dir could not be read, one line each. */
  errors: string[];
}

function listed(name: string, what: string, l: Listing): InvariantResult {
  return result(name, `${what}: ${l.names.length}`, [...l.names, ...l.errors]);
}

/** A dir's entries. Absent: an error when 'required', nothing when it 'may-be-absent'. */
async function entries(dir: string, absent: 'required' | 'may-be-absent'): Promise<Listing> {
  try {
    return { names: await readdir(dir), errors: [] };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && absent === 'may-be-absent') return { names: [], errors: [] };
    return { names: [], errors: [`cannot list ${dir}: ${(err as Error).message}`] };
  }
}

/**
 * `pid: cmdline` of every process whose command line contains `needle` — on the host, or in
 * one of `ours` (container ids), but not in another container (another install's run).
 */
export async function processesRunning(
  needle: string,
  ours: ReadonlySet<string>,
): Promise<{ found: string[]; errors: string[] }> {
  const found: string[] = [];
  const errors: string[] = [];
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ').trim();
      if (!cmdline.includes(needle)) continue;
      const container = /\/docker[-/]([0-9a-f]{64})/.exec(await readFile(`/proc/${pid}/cgroup`, 'utf8'))?.[1];
      if (container === undefined || ours.has(container)) found.push(`${pid}: ${cmdline}`);
    } catch (err) {
      // A process that ended while being read is not a leftover.
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ESRCH')
        errors.push(`cannot read /proc/${pid}: ${(err as Error).message}`);
    }
  }
  return { found, errors };
}
