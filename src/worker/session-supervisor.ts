/**
 * Supervises one claimed session on one worker slot: binds it to a warm sandbox taken
 * from the pool, or starts a cold one, feeds it turns while messages arrive, and ends it
 * when decideSupervision says so (idle, the sandbox's exit, a missed heartbeat, a stop
 * request…). Whatever ends a turn early, the turn is aborted in the store with its
 * catalogue code (its messages retried with backoff or failed) before the sandbox is
 * killed and the lease given back, so the session is re-dispatched without anyone
 * resending anything.
 *
 * The loop is observe → decideSupervision → act, and every ending is decided there. How
 * turns meet the sandbox (an overlay per turn, a sandbox per turn, resident) is the
 * SandboxMode's data, read by TurnLayers, so the loop has no mode branches; the sandbox
 * itself, its phase and its turn in flight are the SandboxController's.
 *
 * Invariant: at most one sandbox per supervisor, and the supervisor's generation is the
 * one its claim set; every write it or its sandbox makes is fenced by it. A turn's layer
 * is settled (promoted if committed, else discarded) before the next turn mounts, or, if a
 * crash cut that short, when the session is next claimed (its pendingLayer).
 */
import type { Logger } from 'pino';
import {
  type Agent,
  BerthError,
  decideResidentRecycle,
  decideSupervision,
  type Ending,
  isBerthError,
  type Message,
  retryUntil,
  type SandboxUsage,
  type Session,
  type StopRequest,
  type SupervisionDecision,
  type SupervisionSnapshot,
  sleep,
  type Turn,
  TurnInFlight,
  WakeSignal,
} from '../core/index.js';
import type { RuntimeEvent } from '../runtime/index.js';
import type { Fence } from '../store/index.js';
import type { WorkspaceQuota } from '../workspace/index.js';
import type { HeldSandbox } from './control-server.js';
import type { SandboxDeps } from './deps.js';
import { sandboxName } from './paths.js';
import { SandboxController } from './sandbox-controller.js';
import { type SandboxFiles, workspaceFilesOf } from './sandbox-files.js';
import { type LaunchedSandbox, profileOf, removeSandboxFiles } from './sandbox-launch.js';
import { type SandboxMode, sandboxModeOf } from './sandbox-modes.js';
import { sessionBinding } from './session-binding.js';
import { turnAssignmentOf } from './turn-assignment.js';
import { TurnLayers } from './turn-layers.js';

export interface SupervisorDeps extends SandboxDeps {
  /** True when another session waits for a slot: this idle sandbox then gives its slot up at once. */
  slotWanted(sandboxName: string): Promise<boolean>;
}

/** How long a session's clean-up retries store calls while the store is away. */
const STORE_AWAY_RETRY_MS = 60_000;
const STORE_AWAY_BACKOFF = { firstMs: 250, maxMs: 2000 };
/** How often a running turn's workspace is measured against the quota. */
const QUOTA_CHECK_MS = 250;

/** What the supervision has seen happen; decideSupervision reads it. */
interface Observed {
  lastHeartbeatAt: number;
  /** The resident sandbox's last reported usage (its heartbeats). */
  usage: SandboxUsage | null;
  exit: Extract<RuntimeEvent, { type: 'exit' }> | null;
  stop: StopRequest | null;
  drainUntil: number | null;
  quotaExceeded: BerthError | null;
  /** The store's interrupt request for the turn being served, once read. */
  interruptRequestedAt: number | null;
  refused: string | null;
  failure: SupervisionSnapshot['failure'];
  boundAt: number;
  idleSince: number;
}

export class SessionSupervisor {
  readonly sandboxName: string;
  private readonly fence: Fence;
  private readonly wake = new WakeSignal();
  private readonly log: Logger;
  private readonly mode: SandboxMode;
  private readonly sandbox: SandboxController;
  private readonly layers: TurnLayers;
  private readonly seen: Observed = {
    lastHeartbeatAt: 0,
    usage: null,
    exit: null,
    stop: null,
    drainUntil: null,
    quotaExceeded: null,
    interruptRequestedAt: null,
    refused: null,
    failure: null,
    boundAt: 0,
    idleSince: 0,
  };
  /** The turn this supervision started whose layer is not settled yet: aborted if the ending says so, settled in finish. */
  private owedLayer: Turn | null = null;
  private quota: WorkspaceQuota | null = null;
  /** Its workspace's files as a client reads and writes them while the sandbox is bound. */
  private readonly files: SandboxFiles;
  /** The store hinted at an interrupt of this session's turn: read the turn's row at the next step. */
  private interruptHint = false;
  /** When the running turn's row is next read for an interrupt request (the hint's polling floor). */
  private interruptReadDueAt = 0;

  constructor(
    private readonly deps: SupervisorDeps,
    readonly session: Session,
    private readonly agent: Agent,
    /** A sandbox taken from the warm pool for this session; null = start a cold one. */
    warm: LaunchedSandbox | null,
  ) {
    this.fence = { sessionId: session.id, generation: session.generation, workerId: deps.workerId };
    this.sandboxName = warm?.name ?? sandboxName(deps.installId, session.id, session.generation);
    this.log = deps.log.child({
      sessionId: session.id,
      generation: session.generation,
      sandbox: this.sandboxName,
      warm: warm !== null,
    });
    this.mode = sandboxModeOf(agent, deps.config);
    this.sandbox = new SandboxController(
      deps,
      this.sandboxName,
      session,
      profileOf(agent, deps.image),
      this.log,
      warm,
    );
    this.layers = new TurnLayers(deps, this.mode, session, this.fence, this.sandboxName, this.log);
    this.files = workspaceFilesOf(deps.workspaces, session.id, this.sandboxName, agent, () => this.quota);
  }

  /** The sandbox this supervision holds bound to its session, for a command a client runs in it (control-server.ts). */
  heldSandbox(): HeldSandbox | null {
    const exec = this.sandbox.execRelay;
    return exec ? { generation: this.fence.generation, exec, files: this.files } : null;
  }

  /** New inbound message for this session, or new demand for slots: re-check now. */
  poke(): void {
    this.wake.notify();
  }

  /** Its running turn was asked to stop (a store hint): the turn's row is read at once. */
  interruptHinted(): void {
    this.interruptHint = true;
    this.wake.notify();
  }

  onSandboxExit(event: Extract<RuntimeEvent, { type: 'exit' }>): void {
    this.seen.exit = event;
    this.wake.notify();
  }

  /** Ends the supervision at the next step (worker shutdown or self-fencing). */
  stop(request: StopRequest): void {
    this.seen.stop = request;
    this.wake.notify();
    if (request === 'LeaseLost') this.sandbox.fence();
  }

  /** Starts no new turn; the running one may end by itself until `until` (epoch ms), then is handed back. */
  drain(until: number): void {
    this.seen.drainUntil ??= until;
    this.wake.notify();
  }

  async run(): Promise<void> {
    // Its copy is in use from before the first turn reads it until the session is given back.
    await this.deps.cacheBudget.use(this.session.id);
    try {
      await this.supervise();
    } finally {
      await this.deps.cacheBudget.release(this.session.id);
    }
  }

  private async supervise(): Promise<void> {
    let ending: Ending;
    try {
      ending = await this.serveTurns();
    } catch (err) {
      // A terminal code (an extra mount the allowlist no longer allows) fails the turn's messages at once.
      const code = err instanceof BerthError ? err.code : 'SANDBOX_FAILED';
      this.seen.failure = { code, message: (err as Error).message };
      // A stop (self-fencing drains the sandbox at once) or an exit explains what failed after it: it is the ending.
      ending = this.decideEnding(this.owedLayer ? 'in-turn' : 'before-work');
      if (ending.reason === 'SupervisorFailed') this.log.error({ err }, 'Session supervision failed');
    }
    await this.finish(ending);
  }

  /**
   * Runs turns until decideSupervision ends the session. The first turn is started before
   * the sandbox, so a sandbox that cannot start costs the message a try (and backoff)
   * instead of being re-claimed at once, forever.
   */
  private async serveTurns(): Promise<Ending> {
    const { store, clock, config } = this.deps;
    if (this.session.pendingLayer) await this.layers.settle(this.session.pendingLayer, 'claim');
    // The name is deterministic: recorded before the first turn starts, so every turn row names its sandbox.
    const recorded = await store.recordSandbox(this.fence, this.sandboxName, clock.now());
    if (recorded !== 'ok') this.seen.refused = recorded;
    this.seen.idleSince = clock.now();
    for (;;) {
      const before = this.decide('before-work');
      if (before.action === 'end') return before.ending;
      const startedAt = performance.now();
      const started = await store.startTurn(this.fence, clock.now());
      if (started.code !== 'ok') {
        this.seen.refused = started.code;
        continue;
      }
      if (started.value) {
        const ending = await this.serveTurn(started.value.turn, started.value.messages, startedAt);
        if (ending) return ending;
        this.seen.idleSince = clock.now();
        continue;
      }
      const idle = this.decide('idle', this.sandbox.isBound ? await this.idleObservations() : undefined);
      if (idle.action === 'end') return idle.ending;
      // The renew tick caps the wait: a message posted through another process wakes no one here.
      if (idle.action === 'wait') await this.wake.wait(Math.min(idle.forMs, config.leaseMs / 5));
    }
  }

  /** Serves one turn; null when it committed and the sandbox serves on. */
  private async serveTurn(turn: Turn, messages: Message[], startedAt: number): Promise<Ending | null> {
    const { clock, config } = this.deps;
    this.owedLayer = turn;
    const preparing = performance.now();
    await this.layers.prepare(turn, messages, this.sandbox.isBound, () => this.bindSandbox());
    const watching = performance.now();
    await this.watchQuota(turn);
    // Where a turn's start went: what the warm-start benchmark's figures break down into.
    this.log.info(
      {
        turnId: turn.id,
        attempt: turn.attempt,
        messages: messages.length,
        mode: this.mode.name,
        startTurnMs: ms(preparing - startedAt),
        prepareMs: ms(watching - preparing),
        quotaMs: ms(performance.now() - watching),
      },
      'Turn started',
    );
    const inFlight = new TurnInFlight(
      turn,
      turnAssignmentOf(this.agent, config, turn, messages, this.layers.resumedFrom(turn)),
    );
    this.sandbox.serve(inFlight);
    this.seen.interruptRequestedAt = null;
    this.interruptReadDueAt = 0;
    for (;;) {
      await this.readInterrupt(turn);
      const decision = this.decide('in-turn');
      switch (decision.action) {
        case 'turn-committed': {
          this.quota?.stop();
          this.log.info(
            { turnId: turn.id, outcome: 'committed', turnMs: clock.now() - turn.startedAt },
            'Turn ended',
          );
          this.sandbox.turnDone();
          if (!(await this.layers.afterCommit(turn))) this.owedLayer = null;
          return null;
        }
        case 'end':
          this.quota?.stop();
          this.log.info(
            { turnId: turn.id, outcome: inFlight.outcome?.kind ?? decision.ending.reason },
            'Turn ended',
          );
          return decision.ending;
        case 'wait':
        case 'look-for-work': {
          const forMs = decision.action === 'wait' ? decision.forMs : 0;
          await this.wake.wait(Math.min(forMs, Math.max(0, this.interruptReadDueAt - clock.now())));
        }
      }
    }
  }

  /**
   * Reads the running turn's row for an interrupt request when the store hinted at one, and
   * otherwise every leaseMs / 5 (a hint can be lost: the renew tick is the floor, as for new
   * messages). A store that is away only delays it.
   */
  private async readInterrupt(turn: Turn): Promise<void> {
    const { store, clock, config } = this.deps;
    if (this.seen.interruptRequestedAt !== null) return;
    if (!this.interruptHint && clock.now() < this.interruptReadDueAt) return;
    this.interruptHint = false;
    this.interruptReadDueAt = clock.now() + config.leaseMs / 5;
    try {
      const row = await store.getTurn(turn.id);
      if (row?.interruptRequestedAt != null) {
        this.seen.interruptRequestedAt = row.interruptRequestedAt;
        this.log.info({ turnId: turn.id, requestedAt: row.interruptRequestedAt }, 'Turn interrupt requested');
      }
    } catch (err) {
      this.log.warn({ err, turnId: turn.id }, 'Reading the turn for an interrupt failed');
    }
  }

  private decide(
    stage: SupervisionSnapshot['stage'],
    idle: Pick<SupervisionSnapshot, 'slotWanted' | 'recycleDue'> = { slotWanted: false, recycleDue: null },
  ): SupervisionDecision {
    const { config, clock } = this.deps;
    const turn = stage === 'in-turn' ? this.sandbox.turn : null;
    const { exit, stop, drainUntil, quotaExceeded, refused, failure, lastHeartbeatAt, idleSince } = this.seen;
    const interruptRequestedAt = stage === 'in-turn' ? this.seen.interruptRequestedAt : null;
    return decideSupervision(
      {
        stage,
        refused,
        failure,
        bound: this.sandbox.isBound,
        turn: turn ? { startedAt: turn.row.startedAt, outcome: turn.outcome } : null,
        exit: exit ? { exitCode: exit.exitCode, oomKilled: exit.oomKilled, at: exit.at } : null,
        stop,
        drainUntil,
        quotaExceeded: quotaExceeded ? { code: quotaExceeded.code, message: quotaExceeded.message } : null,
        interruptRequestedAt,
        lastHeartbeatAt,
        idleSince,
        ...idle,
      },
      clock.now(),
      {
        heartbeatTimeoutMs: config.heartbeatTimeoutMs,
        turnTimeoutMs: config.turnTimeoutMs,
        // A resident sandbox neither idles out nor gives its slot up; it is recycled by its policy, between turns.
        idleTimeoutMs: this.mode.idle === 'resident' ? Number.POSITIVE_INFINITY : config.idleTimeoutMs,
        memoryMb: this.agent.memoryMb,
        freshSandboxPerTurn: this.mode.freshSandboxPerTurn,
      },
    );
  }

  /** With a failure seen, decideSupervision always ends the supervision. */
  private decideEnding(stage: SupervisionSnapshot['stage']): Ending {
    const decision = this.decide(stage);
    if (decision.action !== 'end')
      throw new BerthError(
        'INTERNAL',
        `decideSupervision did not end a failed supervision (${decision.action})`,
      );
    return decision.ending;
  }

  /** What only an idle supervision looks at: demand for its slot, or its resident recycle policy. */
  private async idleObservations(): Promise<Pick<SupervisionSnapshot, 'slotWanted' | 'recycleDue'>> {
    const { store, clock } = this.deps;
    if (this.mode.idle === 'times-out')
      return { slotWanted: await this.deps.slotWanted(this.sandboxName), recycleDue: null };
    const now = clock.now();
    const view = await store.getSessionView(this.session.id, now);
    const decision = decideResidentRecycle(
      {
        startedAt: this.seen.boundAt,
        usage: this.seen.usage,
        recycleRequestedAt: view?.recycleRequestedAt ?? 0,
      },
      now,
      this.agent.recycle ?? {},
    );
    return { slotWanted: false, recycleDue: decision.recycle ? decision.reason : null };
  }

  /** Starts the sandbox if none was taken warm, and binds it to the session (once). */
  private async bindSandbox(): Promise<void> {
    const { clock } = this.deps;
    const binding = sessionBinding(this.deps, {
      agent: this.agent,
      session: this.session,
      fence: this.fence,
      log: this.log,
      hooks: {
        onHeartbeat: (now, usage) => {
          this.seen.lastHeartbeatAt = now;
          if (usage) this.seen.usage = usage;
        },
        beforeCommit: async (turnId) => {
          await this.quota?.check();
          return this.layers.seal(turnId);
        },
        checkpoint: (turnId, label) => this.layers.checkpoint(turnId, label),
        checkpointModelCall: (turnId) => this.layers.checkpointModelCall(turnId),
      },
    });
    await this.sandbox.bind(binding, {
      onChange: () => this.wake.notify(),
      fenceRequested: () => this.seen.stop === 'LeaseLost',
    });
    this.seen.boundAt = clock.now();
    this.seen.lastHeartbeatAt = this.seen.boundAt;
  }

  /** Measures the session's workspace against its quota while the turn runs; over it ends the turn. */
  private async watchQuota(turn: Turn): Promise<void> {
    this.seen.quotaExceeded = null;
    this.quota = await this.deps.workspaces.quota(
      this.session.id,
      this.layers.quotaLayerOf(turn),
      this.agent.workspaceMb * 2 ** 20,
    );
    this.quota.watch(QUOTA_CHECK_MS, (err) => {
      this.seen.quotaExceeded = err;
      this.wake.notify();
    });
  }

  /**
   * Abort the running turn (if it must be), kill the sandbox, settle its layer, give the
   * lease back. Every step runs even if an earlier one failed, and the lease is always
   * given back: a session must never stay leased by a worker that no longer supervises
   * it. A step the store refused because it was away (a PostgreSQL restart) is tried
   * again until STORE_AWAY_RETRY_MS after the clean-up began.
   */
  private async finish(ending: Ending): Promise<void> {
    const { store, clock } = this.deps;
    const turn = this.owedLayer;
    this.quota?.stop();
    this.log.info({ reason: ending.reason, message: ending.message }, 'Session supervision ending');
    const bound = this.sandbox.isBound;
    this.sandbox.drain(ending);
    const storeDeadline = clock.now() + STORE_AWAY_RETRY_MS;
    const step = async (what: string, effect: () => Promise<unknown>) => {
      try {
        await retryUntil(effect, {
          retryable: (err) => isBerthError(err, 'STORE_UNAVAILABLE'),
          backoff: STORE_AWAY_BACKOFF,
          deadline: storeDeadline,
          now: () => clock.now(),
          onRetry: (err) => this.log.warn({ err, step: what }, 'Store away during clean-up; retrying'),
        });
      } catch (err) {
        this.log.error({ err, step: what }, 'Session clean-up step failed');
      }
    };
    const fencing = ending.reason === 'LeaseLost';
    const kill = () =>
      step('kill sandbox', () => this.sandbox.kill({ hard: fencing, exitSeen: this.seen.exit !== null }));
    // Self-fencing: the store may be out of reach (a partition), and the sandbox must be dead
    // before a lease has passed, so it is killed first, hard, without waiting for the store.
    if (fencing) await kill();
    // Alive between turns (a recycle, a drain): a resident workspace is captured before the sandbox goes.
    if (!fencing && !turn && bound && this.seen.exit === null)
      await step('capture workspace', () => this.layers.beforeRelease());
    const abort = ending.abort;
    // 'stale'/'not_found' from the abort means the turn already ended (a commit raced the ending): settling keeps it.
    if (turn && abort)
      await step('abort turn', () =>
        store.abortTurn(
          {
            ...this.fence,
            turnId: turn.id,
            code: abort.code,
            error: abort.error,
            ...(abort.diedAt === undefined
              ? {}
              : { detectedAfterMs: Math.max(0, clock.now() - abort.diedAt) }),
          },
          clock.now(),
        ),
      );
    if (!fencing) await kill();
    await step('close gateway', () => this.sandbox.closeGateway());
    // A fencing worker may have lost the session already: its layer is left on disk to the
    // session's next owner (pendingLayer) or the clean-up, never promoted by two at once.
    if (turn)
      await step('settle layer', () =>
        fencing
          ? this.deps.workspaces.unmountSlot(this.sandboxName)
          : this.layers.settle(turn.id, 'turn-end'),
      );
    await step('remove slot and run dir', () => removeSandboxFiles(this.deps, this.sandboxName));
    this.sandbox.gone();
    // A failure that will repeat at once (e.g. a promotion on a full disk) must not turn into a claim/release spin.
    if (ending.reason === 'SupervisorFailed') await sleep(1000);
    await step('release session', async () => {
      const released = await store.releaseSession(this.fence, clock.now());
      // Swept or archived meanwhile: the lease is someone else's now, and nothing of ours was given back.
      if (released !== 'ok')
        this.log.warn({ code: released, reason: ending.reason }, 'Session was no longer ours to release');
      else this.log.info({ reason: ending.reason, message: ending.message }, 'Session released');
    });
  }
}

const ms = (value: number) => Math.round(value * 10) / 10;
