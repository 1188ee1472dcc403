/**
 * Starting and disposing of one sandbox with its gateway, the same for a cold sandbox
 * (started for a session) and a warm one (started unbound for the pool): run dir with a
 * fresh boot token, slot, gateway listening, then the container. A sandbox that did not
 * start leaves nothing behind. Its lifecycle (core/sandbox-lifecycle.ts) is made before
 * the start begins, by whoever starts it, and moved on by them; launching moves nothing.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import {
  AGENT_CONFIG_MOUNT,
  type AgentMount,
  type AgentSpec,
  GATEWAY_SOCKET_NAME,
  SandboxLifecycle,
  TOKEN_FILE_NAME,
} from '../core/index.js';
import { SandboxGateway } from '../gateway/index.js';
import { resolveMounts } from '../mount-policy/index.js';
import type { SandboxHandle, SandboxSpec } from '../runtime/index.js';
import type { SandboxDeps } from './deps.js';

/** What a sandbox is started with, apart from who it serves: the warm pool's key. */
export interface SandboxProfile {
  image: string;
  memoryMb: number;
  cpus: number;
  pidsLimit: number;
  workspaceMb: number;
  isolation: AgentSpec['isolation'];
  /** The agent's extra data mounts as configured; resolved against the allowlist at each launch. */
  mounts: AgentMount[];
}

export interface LaunchedSandbox {
  name: string;
  handle: SandboxHandle;
  gateway: SandboxGateway;
  lifecycle: SandboxLifecycle;
}

/** A new sandbox's lifecycle, in phase creating: every move it makes is logged once and reported to the store. */
export function newSandboxLifecycle(
  deps: Pick<SandboxDeps, 'workerId' | 'clock' | 'sandboxReports'>,
  name: string,
  log: Logger,
  pooled: boolean,
): SandboxLifecycle {
  const lifecycle = new SandboxLifecycle(name, {
    workerId: deps.workerId,
    pooled,
    now: () => deps.clock.now(),
    onMove: (from, to, why) => log.debug({ sandbox: name, from, to, why }, 'Sandbox phase changed'),
  });
  deps.sandboxReports.track(lifecycle);
  return lifecycle;
}

export function profileOf(agent: AgentSpec, defaultImage: string): SandboxProfile {
  return {
    image: agent.image || defaultImage,
    memoryMb: agent.memoryMb,
    cpus: agent.cpus,
    pidsLimit: agent.pidsLimit,
    workspaceMb: agent.workspaceMb,
    isolation: agent.isolation,
    // A harness agent's instruction files and skills, read-only like any data mount.
    mounts: agent.configDir
      ? [...agent.mounts, { hostPath: agent.configDir, containerPath: AGENT_CONFIG_MOUNT }]
      : agent.mounts,
  };
}

export async function launchSandbox(
  deps: SandboxDeps,
  o: {
    lifecycle: SandboxLifecycle;
    profile: SandboxProfile;
    log: Logger;
    binding?: SandboxSpec['binding'];
    pool?: string;
    onBootWaiting?: () => void;
  },
): Promise<LaunchedSandbox> {
  const { name } = o.lifecycle;
  const runDir = deps.paths.sandboxRunDir(name);
  let gateway: SandboxGateway | null = null;
  try {
    await mkdir(runDir, { recursive: true, mode: 0o755 });
    // Checked again at every start: the allowlist or a symlink may have changed since the agent was created.
    const { mounts, ...resources } = o.profile;
    const extraMounts = await resolveMounts(mounts, deps.config.mountAllowlistFile);
    const workspaceDir = await deps.workspaces.openSlot(name);
    const bootToken = randomBytes(24).toString('base64url');
    await writeFile(join(runDir, TOKEN_FILE_NAME), `${bootToken}\n`, { mode: 0o644 });
    gateway = new SandboxGateway({
      lifecycle: o.lifecycle,
      socketPath: join(runDir, GATEWAY_SOCKET_NAME),
      bootToken,
      secret: deps.secret,
      store: deps.store,
      clock: deps.clock,
      log: o.log,
      maxBodyBytes: 4 * deps.config.maxOutputBytes + 1024 * 1024,
      ...(o.onBootWaiting ? { onBootWaiting: o.onBootWaiting } : {}),
    });
    await gateway.listen();
    const startedAt = performance.now();
    const handle = await deps.runtime.create({
      name,
      ...resources,
      extraMounts,
      installId: deps.installId,
      workerId: deps.workerId,
      ...(o.binding ? { binding: o.binding } : {}),
      ...(o.pool ? { pool: o.pool } : {}),
      runDir,
      workspaceDir,
      runnerDir: deps.runnerDir,
    });
    o.log.info({ startMs: Math.round(performance.now() - startedAt), warm: !o.binding }, 'Sandbox started');
    return { name, handle, gateway, lifecycle: o.lifecycle };
  } catch (err) {
    await gateway?.close().catch(() => undefined);
    await removeSandboxFiles(deps, name).catch(() => undefined);
    throw err;
  }
}

/** The slot and run dir of a sandbox that is gone. */
export async function removeSandboxFiles(deps: SandboxDeps, name: string): Promise<void> {
  await deps.workspaces.closeSlot(name);
  await rm(deps.paths.sandboxRunDir(name), { recursive: true, force: true });
}
