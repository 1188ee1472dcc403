/** runtime: sandboxes behind one interface; Docker (Engine API) is the default engine. */
export type { RuntimeEvent, SandboxHandle, SandboxRuntime, SandboxSpec } from './runtime.js';
export { DockerRuntime } from './docker/docker-runtime.js';
export { assertDockerReachable, connectDocker } from './docker/connect.js';
export { containerOptions, sandboxLabels, RUNNER_MOUNT, SANDBOX_USER, WORKSPACE_MOUNT } from './docker/container-spec.js';
export { stageRunner } from './runner-bundle.js';
