/**
 * What a Pod's status means for its sandbox: started, failed to start (and why), or exited
 * (with the runner's exit code and whether it was OOM-killed). Pure, unit-tested.
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { ErrorCode } from '../../core/index.js';
import { RUNNER_CONTAINER } from './pod-spec.js';

export type PodState =
  | { kind: 'pending' }
  | { kind: 'running' }
  | { kind: 'exited'; exitCode: number | null; oomKilled: boolean }
  | { kind: 'failed-to-start'; code: ErrorCode; reason: string };

/** Waiting reasons that never resolve by waiting: the image is not on the node and cannot be pulled. */
const IMAGE_REASONS = new Set(['ErrImageNeverPull', 'ErrImagePull', 'ImagePullBackOff', 'InvalidImageName']);
const START_REASONS = new Set(['CreateContainerConfigError', 'CreateContainerError', 'RunContainerError']);

export function podState(pod: V1Pod): PodState {
  const runner = pod.status?.containerStatuses?.find((c) => c.name === RUNNER_CONTAINER);
  const terminated = runner?.state?.terminated ?? runner?.lastState?.terminated;
  // The engine could not start the process at all (e.g. a mount it refused): Docker's start would have failed.
  if (terminated?.reason === 'ContainerCannotRun' || terminated?.reason === 'StartError') {
    return {
      kind: 'failed-to-start',
      code: 'SANDBOX_FAILED',
      reason: `${terminated.reason}: ${terminated.message ?? ''}`,
    };
  }
  if (terminated) {
    return { kind: 'exited', exitCode: terminated.exitCode, oomKilled: terminated.reason === 'OOMKilled' };
  }
  if (runner?.state?.running) return { kind: 'running' };
  const phase = pod.status?.phase;
  // Evicted or rejected by the kubelet (e.g. a node selector it does not match): no container ever ran.
  if (phase === 'Failed' || phase === 'Succeeded') {
    return { kind: 'exited', exitCode: null, oomKilled: false };
  }
  const waiting = runner?.state?.waiting;
  if (waiting?.reason && IMAGE_REASONS.has(waiting.reason)) {
    return {
      kind: 'failed-to-start',
      code: 'IMAGE_MISSING',
      reason: `${waiting.reason}: ${waiting.message ?? ''}`,
    };
  }
  if (waiting?.reason && START_REASONS.has(waiting.reason)) {
    return {
      kind: 'failed-to-start',
      code: 'SANDBOX_FAILED',
      reason: `${waiting.reason}: ${waiting.message ?? ''}`,
    };
  }
  return { kind: 'pending' };
}

/** Why a Pod is still pending, for the error when it never starts (e.g. no node matches). */
export function pendingReason(pod: V1Pod): string {
  const condition = pod.status?.conditions?.find((c) => c.status === 'False' && c.message);
  const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
  return condition?.message ?? waiting?.message ?? waiting?.reason ?? pod.status?.phase ?? 'no status yet';
}
