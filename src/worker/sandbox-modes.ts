/**
 * The three ways a sandbox serves its session's turns, behind one interface, so the
 * supervisor's loop has no mode branches (docs/isolation.md, docs/resident.md):
 *
 *   overlay per turn   runc: one sandbox for the session's active period; each turn's
 *                      attempt overlay is mounted on the slot the running sandbox already
 *                      sees (rslave propagation), and settled right after the turn.
 *                      Both layered modes bring the machine's copy level with the
 *                      session's chain before a turn and upload its layer before its
 *                      commit (turn-workspace.ts).
 *   sandbox per turn   gVisor sees only the mounts present at its start: the layer is
 *                      mounted first, the sandbox starts on it, serves that one turn and
 *                      ends; the layer is settled once the sandbox is gone.
 *   resident           one sandbox across turns and idle periods; its processes persist,
 *                      so it writes the committed layer in place (mounted once, before it
 *                      starts); durable state goes through commits, checkpoints and
 *                      storage, and it is recycled by policy between turns.
 */

import type { Logger } from 'pino';
import type { Agent, CommitInput, Ending, Turn, WorkspaceObjectRef } from '../core/index.js';
import type { SandboxDeps } from './deps.js';
import { TurnWorkspace } from './turn-workspace.js';

/** What a mode may ask of the supervisor it serves. */
export interface ModeContext {
  deps: SandboxDeps;
  sessionId: string;
  sandboxName: string;
  log: Logger;
  /** Starts the sandbox if none was taken warm, and binds it to the session (once). */
  bindSandbox(): Promise<void>;
  isBound(): boolean;
  /** Takes a finished turn's layer off the slot and promotes it if committed, else drops it. */
  settleLayer(turnId: string): Promise<void>;
}

export interface SandboxMode {
  readonly name: 'overlay-per-turn' | 'sandbox-per-turn' | 'resident';
  /** Mounts the turn's workspace and makes sure a bound sandbox serves it. */
  prepareTurn(turn: Turn): Promise<void>;
  /** The layer the quota watch measures with the committed one; null = the committed layer itself. */
  quotaLayerOf(turn: Turn): string | null;
  /** Seals the turn's writes before its commit transaction (the gateway's beforeCommit); what the commit must carry of its workspace. */
  sealTurn(turnId: string): Promise<CommitInput['workspace']>;
  /** What a turn this supervision sealed made (its version and object), for its promotion; null otherwise. */
  committedAs(turnId: string): { version: number; layer: WorkspaceObjectRef | null } | null;
  /** After a committed turn's layer was promoted here. */
  afterPromotion(turnId: string): Promise<void>;
  /** After the commit: settles what is left to settle; null keeps the sandbox for the next turn. */
  afterCommit(turn: Turn): Promise<Ending | null>;
  /** The turn whose layer must still be settled once the sandbox is gone, or null. */
  layerAfterKill(turn: Turn): string | null;
  /** Idle rules: a pooled sandbox idles out and gives its slot up; a resident one is recycled by policy. */
  readonly idle: 'times-out' | 'resident';
}

export function sandboxModeOf(agent: Agent, ctx: ModeContext): SandboxMode {
  if (agent.mode === 'resident') return residentMode(ctx);
  if (agent.isolation === 'runsc') return sandboxPerTurnMode(ctx);
  return overlayPerTurnMode(ctx);
}

/** What both layered modes share: the chain's side of every turn. */
function layered(ctx: ModeContext) {
  const workspace = new TurnWorkspace(ctx.deps, ctx.sessionId, ctx.log);
  return {
    workspace,
    quotaLayerOf: (turn: Turn) => turn.id,
    sealTurn: (turnId: string) => workspace.seal(turnId, ctx.sandboxName),
    committedAs: (turnId: string) => workspace.committedAs(turnId),
    afterPromotion: (turnId: string) => workspace.afterPromotion(turnId),
  };
}

function overlayPerTurnMode(ctx: ModeContext): SandboxMode {
  const { workspaces, config } = ctx.deps;
  const { workspace, ...shared } = layered(ctx);
  return {
    name: 'overlay-per-turn',
    idle: 'times-out',
    ...shared,
    // The sandbox starts on the empty slot and the turn's overlay propagates onto it; a layer
    // mounted before the start would be copied into the sandbox and outlive its unmount.
    async prepareTurn(turn) {
      if (!ctx.isBound()) await ctx.bindSandbox();
      await workspace.bringCurrent(turn);
      await workspaces.mountAttempt(ctx.sessionId, turn.id, ctx.sandboxName);
    },
    async afterCommit(turn) {
      await ctx.settleLayer(turn.id);
      return config.idleTimeoutMs === 0
        ? { reason: 'SandboxPerTurn', message: 'a fresh sandbox for every turn (idleTimeout 0)', abort: null }
        : null;
    },
    layerAfterKill: () => null,
  };
}

function sandboxPerTurnMode(ctx: ModeContext): SandboxMode {
  const { workspaces } = ctx.deps;
  const { workspace, ...shared } = layered(ctx);
  return {
    name: 'sandbox-per-turn',
    idle: 'times-out',
    ...shared,
    async prepareTurn(turn) {
      await workspace.bringCurrent(turn);
      await workspaces.mountAttempt(ctx.sessionId, turn.id, ctx.sandboxName);
      if (!ctx.isBound()) await ctx.bindSandbox();
    },
    // The next turn's layer could not reach this sandbox: it ends, and its layer is settled once it is gone.
    afterCommit: async () => ({
      reason: 'SandboxPerTurn',
      message: 'a fresh sandbox for every turn (gVisor)',
      abort: null,
    }),
    layerAfterKill: (turn) => turn.id,
  };
}

function residentMode(ctx: ModeContext): SandboxMode {
  const { workspaces, store } = ctx.deps;
  return {
    name: 'resident',
    idle: 'resident',
    async prepareTurn() {
      if (ctx.isBound()) return;
      await workspaces.mountResident(ctx.sessionId, ctx.sandboxName);
      await ctx.bindSandbox();
    },
    quotaLayerOf: () => null,
    // Its workspace is written in place by processes that outlive turns: it has no layers, and its commits carry none.
    sealTurn: async () => undefined,
    committedAs: () => null,
    afterPromotion: async () => undefined,
    // Its writes are already in the committed layer: nothing to promote, only the mark to clear.
    async afterCommit(turn) {
      await store.markLayerPromoted(ctx.sessionId, turn.id);
      return null;
    },
    layerAfterKill: () => null,
  };
}
