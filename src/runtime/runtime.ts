/**
 * The SandboxRuntime interface: the only way berth starts, watches, lists and kills
 * sandboxes. Engines are reached through their APIs, never by spawning CLI processes.
 */

export interface SandboxSpec {
  /** berth-<install>-<session>-g<generation> (cold) or berth-<install>-pool-<worker>-<n> (warm). */
  name: string;
  image: string;
  installId: string;
  workerId: string;
  /** The session it starts for; absent for a warm sandbox, which its gateway binds later. */
  binding?: { sessionId: string; generation: number };
  /** The warm pool it belongs to (its key), for a warm sandbox. */
  pool?: string;
  memoryMb: number;
  cpus: number;
  pidsLimit: number;
  /** The session's workspace quota, MiB: no single file a process writes may be larger (RLIMIT_FSIZE). */
  workspaceMb: number;
  /** Host dir holding the gateway socket and the token, mounted read-only at /run/berth. */
  runDir: string;
  /** The sandbox's slot: each turn's workspace overlay is mounted on it, and appears at /workspace. */
  workspaceDir: string;
  /** Host dir of the staged runner code, mounted read-only at /opt/berth. */
  runnerDir: string;
  /** runsc: run under gVisor (Docker runtime "runsc"). */
  isolation: 'runc' | 'runsc';
  /** The agent's extra data mounts, resolved against the mount allowlist: mounted read-only. */
  extraMounts: { source: string; target: string }[];
}

export interface SandboxHandle {
  id: string;
  name: string;
  labels: Record<string, string>;
}

export type RuntimeEvent =
  | { type: 'connected'; at: number }
  | { type: 'exit'; id: string; name: string; exitCode: number | null; oomKilled: boolean; at: number }
  | { type: 'disconnected'; error: string; at: number };

export interface SandboxRuntime {
  readonly name: string;
  /** Fails with DOCKER_UNREACHABLE / IMAGE_MISSING naming the fix. */
  check(image: string): Promise<void>;
  /** Created and started, the runner booting. */
  create(spec: SandboxSpec): Promise<SandboxHandle>;
  /**
   * Graceful (1 s), then hard; removes the sandbox. Idempotent. `hard`: no grace (a worker
   * fencing itself, whose lease may lapse within that second). Why it ends is the sandbox's
   * record in the store (SandboxRecord), not the engine's.
   */
  kill(handle: Pick<SandboxHandle, 'id' | 'name'>, options?: { hard?: boolean }): Promise<void>;
  /**
   * Stops every process of the sandbox where it stands, until `thaw`: a capture of its files
   * then reads them as of one instant. false when the engine has no freeze (Kubernetes):
   * the caller goes on unfrozen. Fails (SANDBOX_FAILED) when it could not freeze it, having
   * thawed it again.
   */
  freeze(handle: Pick<SandboxHandle, 'id' | 'name'>): Promise<boolean>;
  /** Lets a frozen sandbox run on. Idempotent: one not frozen is left as it is. */
  thaw(handle: Pick<SandboxHandle, 'id' | 'name'>): Promise<void>;
  /** 'connected' first, then exits and OOM kills of this install's sandboxes as they happen. */
  events(installId: string, signal: AbortSignal, sinceMs?: number): AsyncIterable<RuntimeEvent>;
  /** Sandboxes carrying this install's label, running or not. */
  list(installId: string): Promise<SandboxHandle[]>;
}
