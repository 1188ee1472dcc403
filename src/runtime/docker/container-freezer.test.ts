import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cgroupFreezerOf } from './container-freezer.js';

const ID = 'c0ffee';

const CASES: { name: string; procCgroup: string; want: ReturnType<typeof cgroupFreezerOf> }[] = [
  {
    name: 'cgroup v1, cgroupfs driver (a hybrid host: the v1 freezer wins over the unified line)',
    procCgroup: `9:name=systemd:/docker/${ID}\n6:freezer:/docker/${ID}\n1:cpu,cpuacct:/docker/${ID}\n0::/docker/${ID}\n`,
    want: { kind: 'cgroup-v1', state: `/sys/fs/cgroup/freezer/docker/${ID}/freezer.state` },
  },
  {
    name: 'cgroup v1, systemd driver',
    procCgroup: `6:freezer:/system.slice/docker-${ID}.scope\n`,
    want: {
      kind: 'cgroup-v1',
      state: `/sys/fs/cgroup/freezer/system.slice/docker-${ID}.scope/freezer.state`,
    },
  },
  {
    name: 'cgroup v2, systemd driver',
    procCgroup: `0::/system.slice/docker-${ID}.scope\n`,
    want: {
      kind: 'cgroup-v2',
      freeze: `/sys/fs/cgroup/system.slice/docker-${ID}.scope/cgroup.freeze`,
      events: `/sys/fs/cgroup/system.slice/docker-${ID}.scope/cgroup.events`,
    },
  },
  {
    name: 'cgroup v2 namespaced to the root: nothing of its own to freeze',
    procCgroup: '0::/\n',
    want: null,
  },
  { name: 'nothing readable', procCgroup: '', want: null },
];

for (const c of CASES)
  test(`cgroupFreezerOf: ${c.name}`, () => {
    assert.deepEqual(cgroupFreezerOf(c.procCgroup), c.want);
  });
