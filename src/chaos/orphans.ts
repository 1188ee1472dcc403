/**
 * The no-orphan invariants of the checker: once every berth process has exited, nothing of
 * the run may remain on any of its machines — no container labelled with the machine's
 * install, no mount under its data dir (the shared slots root included), no slot dir, no
 * sandbox run dir, no attempt layer, and no process running the workload's background
 * `tail -f`.
 *
 * Whose such a process is comes from its container's labels, asked of every engine of the
 * run (the host's and each node's): its install label is one of the run's installs, or it
 * is not. A process in no container is this run's (berth runs the workload's command in
 * sandboxes only); one under another chaos run's node group is that run's (its engine is
 * not ours to ask). A process in a container no engine of the run knows cannot be shown to
 * be another's, and fails the check, but one under this run's own node group is this run's
 * (the node's engine may no longer know a container whose process outlived it). The host's
 * processes are the same whichever machine asks, so they are looked at once for all.
 *
 * An engine that does not answer (a node that did not come back) fails the check: what it
 * holds cannot be looked at. Where to look on disk comes from the layouts berth itself
 * writes by (workspace/layout.ts, worker/paths.ts), so a layout change moves the checker
 * with it. A dir the run's workers always create (slots/, workspaces/, run/) must be there:
 * its absence means the checker looks in the wrong place, and fails. Only a session's
 * layers dir may be absent (no turn of it was ever mounted), and those dirs on a machine
 * where no worker ran (the API's, in a run on nodes). Any other error reading a dir fails
 * the invariant that reads it.
 *
 * Invariants of this module: it only reads; one result per kind of leftover, whatever the
 * number of machines; with several, each detail names its machine.
 */
import { readdir } from 'node:fs/promises';
import type Dockerode from 'dockerode';
import { hostPaths, LABELS } from '../core/index.js';
import { listMounts, workspaceLayout } from '../workspace/index.js';
import { type InvariantResult, result } from './invariant-result.js';
import { ownRunId } from './netns.js';
import { nodeRunIn } from './node-cgroup.js';
import { readProcIfAlive } from './read-if-present.js';
import { BACKGROUND_COMMAND } from './workload.js';

/** A machine the leftover checks look at: its data dir, its engine (null: it does not answer), its install. */
export interface Machine {
  name: string;
  dataDir: string;
  installId: string;
  docker: Dockerode | null;
  /** 'may-be-absent' on a machine where no worker ran: its slots, workspaces and run dirs may never be made. */
  workerDirs: 'required' | 'may-be-absent';
}

export async function orphans(machines: Machine[]): Promise<InvariantResult[]> {
  const byName = new Map<string, { what: string; details: string[] }>();
  const named = (m: Machine, d: string) => (machines.length > 1 ? `${m.name}: ${d}` : d);
  for (const m of machines)
    for (const r of await orphansOn(m)) {
      const merged = byName.get(r.name) ?? { what: r.what, details: [] };
      merged.details.push(...r.details.map((d) => named(m, d)));
      byName.set(r.name, merged);
    }
  const processes = await processesRunning(BACKGROUND_COMMAND, machines);
  byName.set('no-orphan-processes', {
    what: `processes of this run running "${BACKGROUND_COMMAND}"`,
    details: [...processes.found, ...processes.errors],
  });
  const where = machines.length > 1 ? ` on ${machines.map((m) => m.name).join(', ')}` : '';
  return [...byName].map(([name, { what, details }]) =>
    result(name, `${what}${where}: ${details.length}`, details),
  );
}

/** One machine's leftovers of each kind but processes: what was looked for, and what was found. */
async function orphansOn(m: Machine): Promise<{ name: string; what: string; details: string[] }[]> {
  const layout = workspaceLayout(m.dataDir);
  const { runDir } = hostPaths(m.dataDir);
  const mounts = (await listMounts()).filter(
    (x) => x.mountPoint === m.dataDir || x.mountPoint.startsWith(`${m.dataDir}/`),
  );
  const slots = await entries(layout.slotsDir, m.workerDirs);
  const runDirs = await entries(runDir, m.workerDirs);
  const sessions = await entries(layout.sessionsDir, m.workerDirs);
  const layers: Listing = { names: [], errors: [...sessions.errors] };
  for (const session of sessions.names) {
    const turns = await entries(layout.layersDir(session), 'may-be-absent');
    layers.names.push(...turns.names.map((turn) => layout.layerPath(session, turn)));
    layers.errors.push(...turns.errors);
  }
  return [
    {
      name: 'no-orphan-containers',
      what: `containers labelled ${LABELS.install}=${m.installId}`,
      details: await containersOf(m),
    },
    {
      name: 'no-orphan-mounts',
      what: `mounts under ${m.dataDir}`,
      details: mounts.map((x) => `${x.mountPoint} (${x.fsType})`),
    },
    listed('no-orphan-slots', `slot dirs under ${layout.slotsDir}`, slots),
    listed('no-orphan-run-dirs', `sandbox run dirs under ${runDir}`, runDirs),
    listed('no-orphan-layers', `attempt layers under ${layout.sessionsDir}/*/layers`, layers),
  ];
}

/** The machine's containers of its install, one line each; a line saying why when its engine cannot list them. */
async function containersOf(m: Machine): Promise<string[]> {
  if (!m.docker) return ['its engine is not running: its containers and their processes cannot be looked at'];
  try {
    const containers = await m.docker.listContainers({
      all: true,
      filters: { label: [`${LABELS.install}=${m.installId}`] },
    });
    return containers.map(
      (c) => `${(c.Names[0] ?? c.Id).replace(/^\//, '')} (${c.State}, worker ${c.Labels[LABELS.worker]})`,
    );
  } catch (err) {
    return [`its engine does not answer: cannot list its containers: ${(err as Error).message}`];
  }
}

interface Listing {
  names: string[];
  /** Why the dir could not be read, one line each. */
  errors: string[];
}

function listed(name: string, what: string, l: Listing) {
  return { name, what, details: [...l.names, ...l.errors] };
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

/** Whose a process is (the module header says how it is told). */
export type ProcessOwner =
  | { owner: 'this-run' }
  | { owner: 'another'; why: string }
  | { owner: 'unknown'; why: string };

/**
 * Decides whose a process is from its cgroup paths (/proc/<pid>/cgroup) and its container's
 * labels as the run's engines have them (null: none of them knows the container; unused
 * for a process in no container).
 */
export function decideProcessOwner(
  cgroups: string,
  labels: Record<string, string> | null,
  run: { installIds: ReadonlySet<string>; runId: string },
): ProcessOwner {
  const container = containerIn(cgroups);
  if (container === undefined) return { owner: 'this-run' };
  const nodeRun =
    cgroups
      .split('\n')
      .map(nodeRunIn)
      .find((r) => r !== null) ?? null;
  if (nodeRun !== null && nodeRun !== run.runId)
    return { owner: 'another', why: `it is in a node of chaos run ${nodeRun}` };
  if (labels !== null) {
    const install = labels[LABELS.install];
    return install !== undefined && run.installIds.has(install)
      ? { owner: 'this-run' }
      : { owner: 'another', why: `its container is labelled ${LABELS.install}=${install ?? '(none)'}` };
  }
  if (nodeRun === run.runId) return { owner: 'this-run' };
  return {
    owner: 'unknown',
    why: `its container ${container.slice(0, 12)} is known to no engine of this run`,
  };
}

/** The container a process is in: a 64-hex component of its cgroup paths (/docker/<id>, docker-<id>.scope, a node's /<group>/<id>). */
function containerIn(cgroups: string): string | undefined {
  return /\/(?:docker-)?([0-9a-f]{64})(?:\.scope)?(?:\/|$)/m.exec(cgroups)?.[1];
}

/**
 * `pid: cmdline` of every process whose command line contains `needle` and that is this
 * run's, or whose owner cannot be told (`decideProcessOwner`); `errors`: what could not be
 * read or asked.
 */
export async function processesRunning(
  needle: string,
  machines: Machine[],
): Promise<{ found: string[]; errors: string[] }> {
  const found: string[] = [];
  const errors: string[] = [];
  const run = { installIds: new Set(machines.map((m) => m.installId)), runId: ownRunId() };
  const engines = machines.flatMap((m) => (m.docker ? [m.docker] : []));
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    const read = await procFiles(pid);
    if (read === null) continue;
    if ('error' in read) {
      errors.push(read.error);
      continue;
    }
    if (!read.cmdline.includes(needle)) continue;
    const container = containerIn(read.cgroups);
    let labels: Record<string, string> | null = null;
    try {
      if (container !== undefined) labels = await labelsOf(container, engines);
    } catch (err) {
      errors.push(
        `${pid}: ${read.cmdline}: cannot ask the engines about its container: ${(err as Error).message}`,
      );
      continue;
    }
    const decision = decideProcessOwner(read.cgroups, labels, run);
    if (decision.owner === 'another') continue;
    // One that ended while its container was asked about is not a leftover.
    if (decision.owner === 'unknown' && (await procFiles(pid)) === null) continue;
    found.push(
      decision.owner === 'this-run' ? `${pid}: ${read.cmdline}` : `${pid}: ${read.cmdline} (${decision.why})`,
    );
  }
  return { found, errors };
}

/** A process's command line and cgroups; null when it has ended; why they could not be read otherwise. */
async function procFiles(
  pid: string,
): Promise<{ cmdline: string; cgroups: string } | { error: string } | null> {
  try {
    const cmdline = await readProcIfAlive(`/proc/${pid}/cmdline`);
    const cgroups = cmdline === null ? null : await readProcIfAlive(`/proc/${pid}/cgroup`);
    if (cmdline === null || cgroups === null) return null;
    return { cmdline: cmdline.split('\0').join(' ').trim(), cgroups };
  } catch (err) {
    return { error: `cannot read /proc/${pid}: ${(err as Error).message}` };
  }
}

/** The container's labels from the first engine that knows it; null when none does. Any other failure throws. */
async function labelsOf(id: string, engines: Dockerode[]): Promise<Record<string, string> | null> {
  for (const docker of engines) {
    try {
      return (await docker.getContainer(id).inspect()).Config.Labels ?? {};
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode !== 404) throw err;
    }
  }
  return null;
}
