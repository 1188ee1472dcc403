import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SandboxSpec } from '../runtime.js';
import { podManifest, podName } from './pod-spec.js';
import { podState } from './pod-status.js';

const spec: SandboxSpec = {
  name: 'berth-abc-Sess_1.x-g3',
  image: 'berth-base:1',
  installId: 'abc',
  workerId: 'wrk_1',
  binding: { sessionId: 'Sess_1.x', generation: 3 },
  memoryMb: 512,
  cpus: 1.5,
  pidsLimit: 64,
  workspaceMb: 100,
  runDir: '/d/run/x',
  workspaceDir: '/d/slots/x',
  runnerDir: '/d/runner/v1',
  isolation: 'runsc',
  extraMounts: [{ source: '/srv/data', target: '/data/ref' }],
};
const settings = {
  namespace: 'berth',
  nodeSelector: { 'berth.dev/machine': 'm1' },
  runtimeClassRunsc: 'gvisor',
};

test('podName: a DNS name, deterministic, distinct for names differing in case only', () => {
  const name = podName(spec.name);
  assert.match(name, /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/);
  assert.ok(name.length <= 63);
  assert.equal(podName(spec.name), name);
  assert.notEqual(podName('berth-abc-sess_1.x-g3'), name);
  assert.ok(podName(`berth-abc-${'s'.repeat(64)}-g1`).length <= 63);
});

test('the Pod carries the hardening, the labels, the RuntimeClass and the node selector', () => {
  const pod = podManifest(spec, settings);
  const s = pod.spec!;
  const [c] = s.containers;
  assert.equal(pod.metadata?.annotations?.['berth.sandbox'], spec.name);
  assert.equal(pod.metadata?.labels?.['berth.session'], 'Sess_1.x');
  assert.equal(pod.metadata?.labels?.['berth.generation'], '3');
  assert.equal(s.runtimeClassName, 'gvisor');
  assert.deepEqual(s.nodeSelector, { 'berth.dev/machine': 'm1' });
  assert.equal(s.automountServiceAccountToken, false);
  assert.equal(s.enableServiceLinks, false);
  assert.equal(s.restartPolicy, 'Never');
  assert.equal(s.securityContext?.runAsNonRoot, true);
  assert.equal(c?.securityContext?.allowPrivilegeEscalation, false);
  assert.equal(c?.securityContext?.readOnlyRootFilesystem, true);
  assert.deepEqual(c?.securityContext?.capabilities?.drop, ['ALL']);
  assert.deepEqual(c?.resources?.limits, { cpu: '1500m', memory: '512Mi' });
  assert.deepEqual(c?.resources?.requests, c?.resources?.limits);
  const mounts = Object.fromEntries((c?.volumeMounts ?? []).map((m) => [m.mountPath, m]));
  assert.equal(mounts['/workspace']?.mountPropagation, 'HostToContainer');
  assert.equal(mounts['/opt/berth']?.readOnly, true);
  assert.equal(mounts['/run/berth']?.readOnly, true);
  assert.equal(mounts['/data/ref']?.readOnly, true);
  assert.equal(podManifest({ ...spec, isolation: 'runc' }, settings).spec?.runtimeClassName, undefined);
});

test('podState: running, exited (OOM), cannot start (image, engine), pending', () => {
  const withRunner = (state: object, phase = 'Running') => ({
    status: {
      phase,
      containerStatuses: [{ name: 'runner', state, image: '', imageID: '', ready: false, restartCount: 0 }],
    },
  });
  assert.equal(podState(withRunner({ running: {} })).kind, 'running');
  assert.deepEqual(podState(withRunner({ terminated: { exitCode: 137, reason: 'OOMKilled' } }, 'Failed')), {
    kind: 'exited',
    exitCode: 137,
    oomKilled: true,
  });
  assert.equal(
    podState(withRunner({ waiting: { reason: 'ErrImageNeverPull' } }, 'Pending')).kind,
    'failed-to-start',
  );
  const cannot = podState(
    withRunner({ terminated: { exitCode: 128, reason: 'ContainerCannotRun', message: 'mount' } }),
  );
  assert.equal(cannot.kind === 'failed-to-start' && cannot.code, 'SANDBOX_FAILED');
  assert.equal(podState({ status: { phase: 'Pending' } }).kind, 'pending');
  assert.deepEqual(podState({ status: { phase: 'Failed' } }), {
    kind: 'exited',
    exitCode: null,
    oomKilled: false,
  });
});
