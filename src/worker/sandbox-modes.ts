/**
 * The three ways a sandbox serves its session's turns, as data the supervisor reads, so
 * its loop has no mode branches and no callbacks (docs/isolation.md, docs/resident.md):
 *
 *   overlay per turn   runc: one sandbox for the session's active period, started on the
 *                      empty slot; each turn's attempt overlay is mounted on the slot the
 *                      running sandbox already sees (rslave propagation), and settled
 *                      right after the commit.
 *   sandbox per turn   gVisor sees only the mounts present at its start: the layer is
 *                      mounted first, the sandbox starts on it, serves that one turn and
 *                      ends; the layer is settled once the sandbox is gone.
 *   resident           one sandbox across turns and idle periods; its processes persist,
 *                      so it writes the committed layer in place (mounted once, before it
 *                      is bound); durable state goes through commits, checkpoints and
 *                      storage, and it is recycled by policy between turns.
 *
 * Both layered modes bring the machine's copy level with the session's chain before a turn
 * and upload its layer before its commit (turn-workspace.ts).
 */
import type { Agent, ResolvedConfig } from '../core/index.js';

export interface SandboxMode {
  readonly name: 'overlay-per-turn' | 'sandbox-per-turn' | 'resident';
  /**
   * What is mounted on the slot before the sandbox is bound (and, when it starts cold,
   * before it starts): nothing (each turn's overlay propagates onto the running sandbox's
   * slot after the bind; one mounted before a start would be copied in and outlive its
   * unmount), the turn's attempt layer (gVisor sees nothing mounted later), or the
   * committed layer itself, once (it propagates onto a warm sandbox's slot too).
   */
  readonly mountBeforeBind: 'nothing' | 'attempt-layer' | 'committed-layer';
  /**
   * When a turn's writes reach the committed layer: its layer is settled right after the
   * commit, or once the sandbox is gone; or they are written there in place (no layer).
   */
  readonly settle: 'after-commit' | 'after-kill' | 'in-place';
  /** Why every turn gets a fresh sandbox, or null when a sandbox serves on after a commit. */
  readonly freshSandboxPerTurn: string | null;
  /** A warm sandbox (started unbound, on an empty slot) can serve it. */
  readonly poolable: boolean;
  /** A pooled sandbox idles out and gives its slot up; a resident one is recycled by policy. */
  readonly idle: 'times-out' | 'resident';
}

export function sandboxModeOf(
  agent: Pick<Agent, 'mode' | 'isolation'>,
  config: Pick<ResolvedConfig, 'idleTimeoutMs'>,
): SandboxMode {
  if (agent.mode === 'resident')
    return {
      name: 'resident',
      mountBeforeBind: 'committed-layer',
      settle: 'in-place',
      freshSandboxPerTurn: null,
      poolable: true,
      idle: 'resident',
    };
  if (agent.isolation === 'runsc')
    return {
      name: 'sandbox-per-turn',
      mountBeforeBind: 'attempt-layer',
      settle: 'after-kill',
      freshSandboxPerTurn: 'gVisor',
      poolable: false,
      idle: 'times-out',
    };
  return {
    name: 'overlay-per-turn',
    mountBeforeBind: 'nothing',
    settle: 'after-commit',
    freshSandboxPerTurn: config.idleTimeoutMs === 0 ? 'idleTimeout 0' : null,
    poolable: true,
    idle: 'times-out',
  };
}
