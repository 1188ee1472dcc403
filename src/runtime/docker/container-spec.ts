/**
 * The container a sandbox is: always-on hardening that no agent config can turn off
 * (no network but loopback, read-only root, tmpfs /tmp, all capabilities dropped,
 * no-new-privileges, an init as PID 1, a pids limit, a non-root user), resource limits
 * from the agent, and this install's labels. Pure, so a unit test can read it.
 */
import type Dockerode from 'dockerode';
import { SANDBOX_RUN_DIR } from '../../core/index.js';
import { RUNNER_ENTRY } from '../runner-bundle.js';
import type { SandboxSpec } from '../runtime.js';
import {
  RUNNER_MOUNT,
  SANDBOX_USER,
  sandboxEnv,
  sandboxLabels,
  WORKSPACE_MOUNT,
} from '../sandbox-contract.js';

/** Engine API 1.40+ field, missing from dockerode's types. */
const READ_ONLY_DATA_BIND = { Propagation: 'rprivate', NonRecursive: true } as const;

/**
 * Under gVisor the pids cgroup holds the user-space kernel's own threads and, on the ptrace
 * platform, a host stub per sandbox process (91 host tasks for 8 sandbox processes,
 * measured): the sandbox's own limit is RLIMIT_NPROC inside gVisor, and the cgroup is a
 * backstop sized above it.
 */
export function runscHostPidsLimit(pidsLimit: number): number {
  return 4 * pidsLimit + 256;
}

export function containerOptions(spec: SandboxSpec): Dockerode.ContainerCreateOptions {
  const memoryBytes = spec.memoryMb * 1024 * 1024;
  return {
    name: spec.name,
    Image: spec.image,
    Cmd: ['node', `${RUNNER_MOUNT}/${RUNNER_ENTRY}`],
    User: SANDBOX_USER,
    WorkingDir: WORKSPACE_MOUNT,
    Env: sandboxEnv(spec),
    Labels: sandboxLabels(spec),
    HostConfig: {
      // runc is the engine's default runtime; runsc must be registered (scripts/ensure-runsc.sh).
      ...(spec.isolation === 'runsc' ? { Runtime: 'runsc' } : {}),
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=64m' },
      // Docker's default, stated: /dev/shm is the other scratch tmpfs (limit-checked like /tmp).
      ShmSize: 64 * 2 ** 20,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Init: true,
      PidsLimit: spec.isolation === 'runsc' ? runscHostPidsLimit(spec.pidsLimit) : spec.pidsLimit,
      Memory: memoryBytes,
      MemorySwap: memoryBytes,
      NanoCpus: Math.round(spec.cpus * 1e9),
      // A single disk filler stops at the quota even between two checks of the worker's quota watch.
      Ulimits: [
        { Name: 'fsize', Soft: spec.workspaceMb * 2 ** 20, Hard: spec.workspaceMb * 2 ** 20 },
        // gVisor counts the sandbox's processes in its own kernel (RLIMIT_NPROC); under runc the count would be
        // per host uid, shared by every sandbox, so there the pids cgroup alone is the limit.
        ...(spec.isolation === 'runsc'
          ? [{ Name: 'nproc', Soft: spec.pidsLimit, Hard: spec.pidsLimit }]
          : []),
      ],
      Binds: [`${spec.runnerDir}:${RUNNER_MOUNT}:ro`, `${spec.runDir}:${SANDBOX_RUN_DIR}:ro`],
      // rslave: each turn's overlay, mounted on the host side of the slot later, appears here.
      Mounts: [
        {
          Type: 'bind',
          Source: spec.workspaceDir,
          Target: WORKSPACE_MOUNT,
          BindOptions: { Propagation: 'rslave' },
        },
        // NonRecursive: a mount below the allowed directory on the host is not carried in (nor left writable).
        ...spec.extraMounts.map((m) => ({
          Type: 'bind' as const,
          Source: m.source,
          Target: m.target,
          ReadOnly: true,
          BindOptions: READ_ONLY_DATA_BIND,
        })),
      ],
      AutoRemove: false,
    },
  };
}
