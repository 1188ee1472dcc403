/** runtime: sandboxes behind one interface; Docker (Engine API) is the default engine. */

export { assertDockerReachable, connectDocker } from './docker/connect.js';
export { containerOptions } from './docker/container-spec.js';
export { DockerRuntime } from './docker/docker-runtime.js';
export { type FrozenTimings, whileFrozen } from './frozen.js';
export { loadKubeConfig } from './kubernetes/connect.js';
export { KubernetesRuntime } from './kubernetes/kubernetes-runtime.js';
export { podManifest, podName } from './kubernetes/pod-spec.js';
export { stageRunner } from './runner-bundle.js';
export type { RuntimeEvent, SandboxHandle, SandboxRuntime, SandboxSpec } from './runtime.js';
export { RUNNER_MOUNT, SANDBOX_USER, sandboxLabels, WORKSPACE_MOUNT } from './sandbox-contract.js';
