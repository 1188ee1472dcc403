/**
 * Whose a leftover process is, decided from its cgroup paths and its container's labels:
 * a table of named cases, each a way a process of this run could hide or another's could
 * be taken for ours; and a machine whose engine is down or mute fails the check.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import type Dockerode from 'dockerode';
import { hostPaths, LABELS } from '../core/index.js';
import { connectDocker } from '../runtime/index.js';
import { workspaceLayout } from '../workspace/index.js';
import { decideProcessOwner, type Machine, orphans, type ProcessOwner } from './orphans.js';

const ID = 'ab'.repeat(32);
const RUN = { installIds: new Set(['api01', 'node01']), runId: 'r1' };
const cgroups = (path: string) => `9:name=systemd:${path}\n6:freezer:${path}\n`;

const CASES: {
  name: string;
  cgroups: string;
  labels: Record<string, string> | null;
  want: ProcessOwner['owner'];
}[] = [
  { name: 'a host process', cgroups: cgroups('/user.slice'), labels: null, want: 'this-run' },
  {
    name: "in a host container labelled with the API's install",
    cgroups: cgroups(`/docker/${ID}`),
    labels: { [LABELS.install]: 'api01' },
    want: 'this-run',
  },
  {
    name: "in a node's container labelled with the node's install",
    cgroups: cgroups(`/berth-r1-n2/${ID}`),
    labels: { [LABELS.install]: 'node01' },
    want: 'this-run',
  },
  {
    name: "in this run's node, in a container its engine no longer knows",
    cgroups: cgroups(`/berth-r1-n1/${ID}`),
    labels: null,
    want: 'this-run',
  },
  {
    name: 'in a host container of another install',
    cgroups: cgroups(`/docker/${ID}`),
    labels: { [LABELS.install]: 'other' },
    want: 'another',
  },
  {
    name: 'in a host container with no install label',
    cgroups: cgroups(`/system.slice/docker-${ID}.scope`),
    labels: {},
    want: 'another',
  },
  {
    name: "in another chaos run's node",
    cgroups: cgroups(`/berth-r2-n1/${ID}`),
    labels: null,
    want: 'another',
  },
  {
    name: 'in a host container no engine of the run knows',
    cgroups: cgroups(`/docker/${ID}`),
    labels: null,
    want: 'unknown',
  },
];

for (const c of CASES)
  test(`decideProcessOwner: ${c.name}: ${c.want}`, () => {
    assert.equal(decideProcessOwner(c.cgroups, c.labels, RUN).owner, c.want);
  });

/** A machine whose workers made their dirs and left nothing, on an engine that is `docker`. */
async function cleanMachine(t: TestContext, name: string, docker: Dockerode | null): Promise<Machine> {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-orphans-test-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const layout = workspaceLayout(dataDir);
  for (const dir of [layout.slotsDir, layout.sessionsDir, hostPaths(dataDir).runDir])
    await mkdir(dir, { recursive: true });
  return { name, dataDir, installId: `${name}-install`, docker, workerDirs: 'required' };
}

test('no-orphan-containers fails for a node whose engine is down or does not answer, naming it', async (t) => {
  const down = await cleanMachine(t, 'n1', null);
  const mute = await cleanMachine(t, 'n2', connectDocker(join(down.dataDir, 'no-engine.sock')));
  const results = await orphans([down, mute]);
  const containers = results.find((r) => r.name === 'no-orphan-containers')!;
  assert.equal(containers.passed, false);
  assert.match(containers.details[0]!, /^n1: its engine is not running/);
  assert.match(
    containers.details[1]!,
    /^n2: its engine does not answer: cannot list its containers: .*ENOENT/,
  );
  assert.deepEqual(
    results.filter((r) => !r.passed).map((r) => r.name),
    ['no-orphan-containers'],
    'the disks were clean',
  );
});
