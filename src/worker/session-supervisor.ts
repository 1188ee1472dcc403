/**
 * Supervises one claimed session on one worker slot: binds it to a warm sandbox taken
 * from the pool, or starts a cold one, and feeds it turns while messages arrive, and ends it on idle timeout, sandbox exit, or a
 * missed heartbeat. Whatever ends a turn early, the turn is aborted in the store (its
 * messages retried with backoff or failed) before the sandbox is killed and the lease
 * given back, so the session is re-dispatched without anyone resending anything.
 *
 * Each turn works in its own attempt layer mounted on the sandbox's slot; it is sealed by
 * the gateway before the store commit and promoted (or discarded) right after the turn
 * ends, before the next turn mounts. A promotion a crash cut short is finished when the
 * session is next claimed (its pendingLayer).
 *
 * Invariant: at most one sandbox per supervisor, and the supervisor's generation is the
 * one its claim set; every write it or its sandbox makes is fenced by it.
 */
import type { Logger } from 'pino';
import {
  type Agent,
  BerthError,
  decideResidentRecycle,
  decideSandboxHealth,
  isBerthError,
  isHarness,
  MODEL_DEFAULTS,
  type SandboxUsage,
  type Session,
  type Turn,
  type TurnAssignment,
  WakeSignal,
} from '../core/index.js';
import type { SandboxGateway, TurnEnd } from '../gateway/index.js';
import type { RuntimeEvent, SandboxHandle } from '../runtime/index.js';
import type { Fence } from '../store/index.js';
import type { WorkspaceQuota } from '../workspace/index.js';
import type { SandboxDeps } from './deps.js';
import { harnessSettings } from './harness-settings.js';
import { sandboxName } from './paths.js';
import { type LaunchedSandbox, launchSandbox, profileOf, removeSandboxFiles } from './sandbox-launch.js';
import { sessionBinding } from './session-binding.js';

export interface SupervisorDeps extends SandboxDeps {
  /** True when another session waits for a slot: this idle sandbox then gives its slot up at once. */
  slotWanted(sandboxName: string): Promise<boolean>;
}

const SUPERVISOR_ERROR = 'supervisor error';
/** The reason Worker.stop gives its supervisors. */
export const WORKER_STOPPING = 'worker stopping';
/** The worker's own lease is lapsing (self-fencing), or its row is gone. */
export const LEASE_LOST = 'lease lost';
/** How long a session's clean-up retries store calls while the store is away. */
const STORE_AWAY_RETRY_MS = 60_000;

/**
 * terminal: the turn hit a limit a retry would hit again; its messages fail now.
 * diedAt: when the sandbox died (its exit event, or its last heartbeat), for the detection time.
 */
type Ending = { reason: string; turnError: string; terminal?: boolean; diedAt?: number };
/** How often a running turn's workspace is measured against the quota. */
const QUOTA_CHECK_MS = 250;

export class SessionSupervisor {
  readonly sandboxName: string;
  private readonly fence: Fence;
  private readonly wake = new WakeSignal();
  private readonly log: Logger;
  private gateway: SandboxGateway | null;
  private handle: SandboxHandle | null;
  /** The gateway has handed the runner this session's binding. */
  private bound = false;
  private lastHeartbeatAt = 0;
  private exit: Extract<RuntimeEvent, { type: 'exit' }> | null = null;
  private turnEnd: { turnId: string; end: TurnEnd } | null = null;
  private currentTurn: Turn | null = null;
  private stopping: string | null = null;
  /** The self-fencing kill was issued (stop(LEASE_LOST) repeats while the lease lapses). */
  private fenceKilled = false;
  private quota: WorkspaceQuota | null = null;
  /** A committed turn's layer to settle after the sandbox is killed (gVisor), not before. */
  private layerAfterKill: string | null = null;
  private quotaExceeded: BerthError | null = null;
  /** Resident agent: one sandbox across turns and idle periods, recycled by policy (docs/resident.md). */
  private readonly resident: boolean;
  private boundAt = 0;
  /** The resident sandbox's last reported usage (its heartbeats). */
  private usage: SandboxUsage | null = null;

  constructor(
    private readonly deps: SupervisorDeps,
    readonly session: Session,
    private readonly agent: Agent,
    /** A sandbox taken from the warm pool for this session; null = start a cold one. */
    warm: LaunchedSandbox | null,
  ) {
    this.fence = { sessionId: session.id, generation: session.generation, workerId: deps.workerId };
    this.sandboxName = warm?.name ?? sandboxName(deps.installId, session.id, session.generation);
    this.resident = agent.mode === 'resident';
    this.gateway = warm?.gateway ?? null;
    this.handle = warm?.handle ?? null;
    this.log = deps.log.child({
      sessionId: session.id,
      generation: session.generation,
      sandbox: this.sandboxName,
      warm: warm !== null,
    });
  }

  /** New inbound message for this session, or new demand for slots: re-check now. */
  poke(): void {
    this.wake.notify();
  }

  onSandboxExit(event: Extract<RuntimeEvent, { type: 'exit' }>): void {
    this.exit = event;
    this.wake.notify();
  }

  /** Ends the supervision at the next step (worker shutdown or self-fencing). */
  stop(reason: string): void {
    this.stopping = reason;
    this.wake.notify();
    // Self-fencing: the sandbox dies now, whatever the supervision is waiting for (a store out of reach).
    if (reason === LEASE_LOST && this.handle && !this.fenceKilled) {
      this.fenceKilled = true;
      this.deps.runtime
        .kill(this.handle, reason, { hard: true })
        .catch((err: unknown) =>
          this.log.warn({ err }, 'Self-fencing kill failed; the clean-up kills again'),
        );
    }
  }

  async run(): Promise<void> {
    let ending: Ending;
    try {
      ending = await this.serveTurns();
    } catch (err) {
      this.log.error({ err }, 'Session supervision failed');
      // A terminal error (an extra mount the allowlist no longer allows) would fail every retry the same way.
      const terminal = err instanceof BerthError && !err.retryable;
      const turnError = terminal
        ? `${err.code}: ${err.message}`
        : `sandbox failed: ${(err as Error).message}`;
      ending = { reason: SUPERVISOR_ERROR, turnError, terminal };
    }
    await this.finish(ending);
  }

  /**
   * Starts a cold sandbox unless a warm one was taken, then binds it to this session: the
   * gateway answers the runner's GET /v1/bind with the session token.
   */
  private async bindSandbox(): Promise<void> {
    const { clock } = this.deps;
    if (!this.handle) {
      const launched = await launchSandbox(this.deps, {
        name: this.sandboxName,
        profile: profileOf(this.agent, this.deps.image),
        log: this.log,
        binding: { sessionId: this.session.id, generation: this.session.generation },
      });
      this.gateway = launched.gateway;
      this.handle = launched.handle;
    }
    this.gateway!.bind(
      sessionBinding(this.deps, {
        agent: this.agent,
        session: this.session,
        fence: this.fence,
        log: this.log,
        hooks: {
          onHeartbeat: (now, usage) => {
            this.lastHeartbeatAt = now;
            if (usage) this.usage = usage;
          },
          beforeCommit: async (turnId) => {
            await this.quota?.check();
            if (!this.resident) await this.deps.workspaces.seal(this.session.id, turnId, this.sandboxName);
          },
          onTurnEnded: (turnId, end) => {
            this.turnEnd = { turnId, end };
            this.wake.notify();
          },
        },
      }),
    );
    this.bound = true;
    this.boundAt = clock.now();
    this.lastHeartbeatAt = this.boundAt;
  }

  /** Why this resident sandbox is replaced now (max age, resident set, open files, a request), or null. */
  private async residentRecycle(): Promise<string | null> {
    const { store, clock } = this.deps;
    const now = clock.now();
    const view = await store.getSessionView(this.session.id, now);
    const decision = decideResidentRecycle(
      { startedAt: this.boundAt, usage: this.usage, recycleRequestedAt: view?.recycleRequestedAt ?? 0 },
      now,
      this.agent.recycle ?? {},
    );
    return decision.recycle ? decision.reason : null;
  }

  /**
   * Runs turns until the session goes idle or something ends it; returns why it ended.
   * The first turn is started before the sandbox, so a sandbox that cannot start costs the
   * message a try (and backoff) instead of being re-claimed at once, forever.
   */
  private async serveTurns(): Promise<Ending> {
    const { store, clock, config } = this.deps;
    if (this.session.pendingLayer) await this.settleLayer(this.session.pendingLayer);
    // The name is deterministic: recorded before the first turn starts, so every turn row names its sandbox.
    if ((await store.recordSandbox(this.fence, this.sandboxName, clock.now())) !== 'ok') {
      return { reason: 'lease lost before the sandbox started', turnError: '' };
    }
    let idleSince = clock.now();
    for (;;) {
      const early = this.earlyEnding(null);
      if (early) return early;
      const t0 = performance.now();
      const started = await store.startTurn(this.fence, clock.now());
      if (started.code !== 'ok') return { reason: `lease lost (${started.code})`, turnError: '' };
      if (started.value) {
        const { turn, messages } = started.value;
        this.currentTurn = turn;
        const t1 = performance.now();
        // runc: the sandbox starts on the empty slot and each turn's overlay propagates onto it (rslave); a layer
        // mounted before the start would be copied into the sandbox and outlive its unmount. gVisor sees only the
        // mounts present at its start: its layer goes first, and the sandbox serves that one turn (docs/isolation.md).
        // A resident sandbox writes the committed layer in place for its whole life: mounted once, before it starts.
        const layerFirst = !this.resident && this.agent.isolation === 'runsc';
        if (this.resident && !this.bound)
          await this.deps.workspaces.mountResident(this.session.id, this.sandboxName);
        if (layerFirst) await this.deps.workspaces.mountAttempt(this.session.id, turn.id, this.sandboxName);
        if (!this.bound) await this.bindSandbox();
        const t2 = performance.now();
        if (!layerFirst && !this.resident)
          await this.deps.workspaces.mountAttempt(this.session.id, turn.id, this.sandboxName);
        const t3 = performance.now();
        await this.watchQuota(turn);
        // Where a turn's start went: what the warm-start benchmark's figures break down into.
        const timings = {
          startTurnMs: ms(t1 - t0),
          bindMs: ms(t2 - t1),
          mountMs: ms(t3 - t2),
          quotaMs: ms(performance.now() - t3),
        };
        const ending = await this.superviseTurn(turn, messages, timings);
        this.quota?.stop();
        if (ending) return ending;
        if (this.resident) {
          // Its writes are already in the committed layer: nothing to promote, only the mark to clear.
          await store.markLayerPromoted(this.session.id, turn.id);
          this.currentTurn = null;
          continue;
        }
        if (this.agent.isolation === 'runsc') {
          // The next turn's layer could not reach this sandbox: it ends, and its layer is settled once it is gone.
          this.currentTurn = null;
          this.layerAfterKill = turn.id;
          return { reason: 'fresh sandbox per turn (gVisor)', turnError: '' };
        }
        await this.settleLayer(turn.id);
        this.currentTurn = null;
        idleSince = clock.now();
        if (config.idleTimeoutMs === 0) return { reason: 'fresh sandbox per turn', turnError: '' };
        continue;
      }
      if (!this.bound) return { reason: 'nothing runnable', turnError: '' };
      // A resident sandbox neither idles out nor gives its slot up; it is recycled by its policy, between turns.
      const idleLeftMs = this.resident
        ? Number.POSITIVE_INFINITY
        : config.idleTimeoutMs - (clock.now() - idleSince);
      if (idleLeftMs <= 0) return { reason: 'idle', turnError: '' };
      if (!this.resident && (await this.deps.slotWanted(this.sandboxName)))
        return { reason: 'slot wanted by a queued session', turnError: '' };
      const recycle = this.resident ? await this.residentRecycle() : null;
      if (recycle) return { reason: `recycled: ${recycle}`, turnError: '' };
      const health = this.health(null);
      if (health.action === 'kill') return { reason: health.reason, turnError: '' };
      // The renew tick caps the wait: a message posted through another process wakes no one here.
      await this.wake.wait(Math.min(idleLeftMs, health.nextCheckInMs, config.leaseMs / 5));
    }
  }

  /**
   * Returns null when the turn committed; otherwise why the sandbox must end. A turn the
   * runner aborted itself ends the sandbox too: its retry gets a fresh one after backoff.
   */
  private async superviseTurn(
    turn: Turn,
    messages: { id: number; text: string }[],
    timings: Record<string, number>,
  ): Promise<Ending | null> {
    const { config, clock } = this.deps;
    const assignment: TurnAssignment = {
      turnId: turn.id,
      sessionId: turn.sessionId,
      generation: turn.generation,
      attempt: turn.attempt,
      provider: this.agent.provider,
      messages: messages.map((m) => ({ id: m.id, text: m.text })),
      limits: { maxOutputBytes: config.maxOutputBytes, heartbeatIntervalMs: config.heartbeatIntervalMs },
      ...harnessSettings(this.agent),
      ...(this.agent.model && !isHarness(this.agent.provider)
        ? {
            model: {
              model: this.agent.model,
              maxTokens: this.agent.maxTokens ?? MODEL_DEFAULTS.maxTokens,
              maxSteps: this.agent.maxSteps ?? MODEL_DEFAULTS.maxSteps,
              toolTimeoutMs: this.agent.toolTimeoutMs ?? MODEL_DEFAULTS.toolTimeoutMs,
              instructions: this.agent.instructions ?? '',
            },
          }
        : {}),
    };
    this.log.info(
      { turnId: turn.id, attempt: turn.attempt, messages: messages.length, ...timings },
      'Turn started',
    );
    this.gateway!.offerTurn(assignment);
    for (;;) {
      if (this.turnEnd?.turnId === turn.id) {
        const { end } = this.turnEnd;
        this.log.info(
          { turnId: turn.id, outcome: end.kind, turnMs: clock.now() - turn.startedAt },
          'Turn ended',
        );
        this.turnEnd = null;
        return end.kind === 'committed' ? null : { reason: 'turn aborted by the runner', turnError: '' };
      }
      const early = this.earlyEnding(turn);
      if (early) return early;
      const health = this.health(turn);
      switch (health.action) {
        case 'kill':
          this.log.warn({ reason: health.reason, ageMs: health.ageMs }, 'Killing unhealthy sandbox');
          return {
            reason: health.reason,
            turnError: `sandbox killed: ${health.reason} after ${health.ageMs} ms`,
            ...(health.reason === 'heartbeat-timeout' ? { diedAt: this.lastHeartbeatAt } : {}),
          };
        case 'ok':
          await this.wake.wait(health.nextCheckInMs);
      }
    }
  }

  /** Measures the session's workspace against its quota while the turn runs; over it ends the turn. */
  private async watchQuota(turn: Turn): Promise<void> {
    this.quotaExceeded = null;
    const layer = this.resident ? null : turn.id;
    this.quota = await this.deps.workspaces.quota(this.session.id, layer, this.agent.workspaceMb * 2 ** 20);
    this.quota.watch(QUOTA_CHECK_MS, (err) => {
      this.quotaExceeded = err;
      this.wake.notify();
    });
  }

  private earlyEnding(turn: Turn | null): Ending | null {
    if (turn && this.quotaExceeded) {
      const err = this.quotaExceeded;
      return { reason: 'workspace quota exceeded', turnError: `${err.code}: ${err.message}`, terminal: true };
    }
    if (this.exit) {
      const e = this.exit;
      if (e.oomKilled && turn) {
        return {
          reason: 'sandbox exited',
          turnError: `SANDBOX_OUT_OF_MEMORY: sandbox exited mid-turn, killed at its memory limit (${this.agent.memoryMb} MiB)`,
          terminal: true,
        };
      }
      const cause = e.oomKilled ? 'out of memory' : `exit code ${e.exitCode}`;
      return {
        reason: 'sandbox exited',
        turnError: turn ? `sandbox exited mid-turn (${cause})` : '',
        diedAt: e.at,
      };
    }
    if (this.stopping)
      return { reason: this.stopping, turnError: turn ? `worker stopped: ${this.stopping}` : '' };
    return null;
  }

  private health(turn: Turn | null) {
    const { config, clock } = this.deps;
    return decideSandboxHealth(
      { lastHeartbeatAt: this.lastHeartbeatAt, turnStartedAt: turn ? turn.startedAt : null },
      clock.now(),
      { heartbeatTimeoutMs: config.heartbeatTimeoutMs, turnTimeoutMs: config.turnTimeoutMs },
    );
  }

  /** Takes a finished turn's layer off the slot and promotes it if the store says committed, else drops it. */
  private async settleLayer(turnId: string): Promise<void> {
    const { store, workspaces } = this.deps;
    await workspaces.unmountSlot(this.sandboxName);
    if ((await store.getTurn(turnId))?.status === 'committed') {
      if (this.deps.config.failpoint === 'kill-before-promote') process.kill(process.pid, 'SIGKILL');
      await workspaces.promote(this.session.id, turnId);
      await store.markLayerPromoted(this.session.id, turnId);
    }
    await workspaces.discard(this.session.id, turnId);
  }

  /**
   * Abort the running turn (if any), kill the sandbox, settle its layer, give the lease
   * back. Every step runs even if an earlier one failed, and the lease is always given
   * back: a session must never stay leased by a worker that no longer supervises it. A
   * step the store refused because it was away (a PostgreSQL restart, issue 8) is tried
   * again until STORE_AWAY_RETRY_MS after the clean-up began.
   */
  private async finish(ending: Ending): Promise<void> {
    const { store, clock, runtime } = this.deps;
    const turn = this.currentTurn;
    this.quota?.stop();
    const storeDeadline = Date.now() + STORE_AWAY_RETRY_MS;
    const step = async (what: string, effect: () => Promise<unknown>) => {
      try {
        for (let delayMs = 250; ; delayMs = Math.min(2 * delayMs, 2000)) {
          try {
            await effect();
            break;
          } catch (err) {
            if (!isBerthError(err, 'STORE_UNAVAILABLE') || Date.now() + delayMs > storeDeadline) throw err;
            this.log.warn({ err, step: what }, 'Store away during clean-up; retrying');
            await new Promise((r) => setTimeout(r, delayMs));
          }
        }
      } catch (err) {
        this.log.error({ err, step: what }, 'Session clean-up step failed');
      }
    };
    const fencing = ending.reason === LEASE_LOST;
    const killSandbox = async () => {
      if (this.handle || this.exit)
        await step('kill sandbox', () =>
          runtime.kill(this.handle ?? { id: '', name: this.sandboxName }, ending.reason, { hard: fencing }),
        );
    };
    // Self-fencing: the store may be out of reach (a partition), and the sandbox must be dead
    // before a lease has passed, so it is killed first, hard, without waiting for the store.
    if (fencing) await killSandbox();
    // 'stale'/'not_found' from the abort means the turn already ended (a commit raced the ending): settleLayer keeps it.
    if (turn)
      await step('abort turn', () =>
        store.abortTurn(
          {
            ...this.fence,
            turnId: turn.id,
            error: ending.turnError || ending.reason,
            // A stop asked of the worker (deploy, restart) is not the turn's fault: no try is spent.
            countsAsTry: ending.reason !== WORKER_STOPPING,
            terminal: ending.terminal ?? false,
            ...(ending.diedAt === undefined
              ? {}
              : { detectedAfterMs: Math.max(0, clock.now() - ending.diedAt) }),
          },
          clock.now(),
        ),
      );
    if (!fencing) await killSandbox();
    await step('close gateway', async () => this.gateway?.close());
    const layer = turn?.id ?? this.layerAfterKill;
    // A fencing worker may have lost the session already: its layer is left on disk to the
    // session's next owner (pendingLayer) or the clean-up, never promoted by two at once.
    if (layer)
      await step('settle layer', () =>
        fencing ? this.deps.workspaces.unmountSlot(this.sandboxName) : this.settleLayer(layer),
      );
    await step('remove slot and run dir', () => removeSandboxFiles(this.deps, this.sandboxName));
    // A failure that will repeat at once (e.g. a promotion on a full disk) must not turn into a claim/release spin.
    if (ending.reason === SUPERVISOR_ERROR) await new Promise((r) => setTimeout(r, 1000));
    await step('release session', () => store.releaseSession(this.fence, clock.now()));
    this.log.info({ reason: ending.reason }, 'Session released');
  }
}

const ms = (value: number) => Math.round(value * 10) / 10;
