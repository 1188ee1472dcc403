/**
 * What every engine's sandbox has in common, whatever runs it (Docker container or
 * Kubernetes Pod): where the runner, the run dir and the workspace appear, the user it
 * runs as, its environment and its labels.
 */
import { EGRESS_PROXY_PORT, LABELS, SANDBOX_RUN_DIR } from '../core/index.js';
import type { SandboxSpec } from './runtime.js';

export const SANDBOX_USER = '1000:1000';
export const RUNNER_MOUNT = '/opt/berth';
export const WORKSPACE_MOUNT = '/workspace';

export function sandboxLabels(spec: SandboxSpec): Record<string, string> {
  // Labels cannot change after create: a warm sandbox carries its pool, not the session it gets later.
  return {
    [LABELS.install]: spec.installId,
    [LABELS.worker]: spec.workerId,
    ...(spec.binding
      ? { [LABELS.session]: spec.binding.sessionId, [LABELS.generation]: String(spec.binding.generation) }
      : {}),
    ...(spec.pool ? { [LABELS.pool]: spec.pool } : {}),
  };
}

/** NAME=value entries of the runner's environment. */
export function sandboxEnv(spec: SandboxSpec): string[] {
  return [
    `BERTH_RUN_DIR=${SANDBOX_RUN_DIR}`,
    `BERTH_ISOLATION=${spec.isolation}`,
    'HOME=/tmp',
    // Ordinary tools reach the network only through the runner's proxy, i.e. the gateway's egress allowlist.
    ...['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'].map(
      (name) => `${name}=http://127.0.0.1:${EGRESS_PROXY_PORT}`,
    ),
    // The sandbox's own loopback stays local (the proxy would connect from the host).
    'NO_PROXY=localhost,127.0.0.1,::1',
    'no_proxy=localhost,127.0.0.1,::1',
    'PATH=/usr/local/bin:/usr/bin:/bin',
  ];
}
