/**
 * The lifecycle of one sandbox, written down once (docs/state-machine.md, "Sandbox"):
 *
 *   creating ──▶ warm ──▶ bound ⇄ serving
 *      │  └─────────────────▲ │       │
 *      └──────────┴─────────┴─┴───────┴──▶ draining ──▶ gone
 *
 * A pooled sandbox is created unbound (creating → warm) and bound when a session takes it;
 * a cold one is started for its session (creating → bound). Between turns it is bound;
 * while a turn runs it is serving. Whatever ends it (idle, exit, a kill, the worker
 * stopping) moves it to draining with its typed end reason, and once it is killed and its
 * files are removed it is gone.
 *
 * What each phase holds, and nobody else: while warm, whether its runner waits on
 * GET /v1/bind right now (ready to bind); from bound on, the session and generation it is
 * bound to; while serving, the turn in flight and whether the runner was handed it; while
 * draining, why it ends and whether it was killed hard by self-fencing.
 *
 * Invariants: one SandboxLifecycle per sandbox, from the start of its creation; the warm
 * pool, the session supervisor and the gateway read its state here and keep no flag of
 * their own. A move the table does not allow throws INTERNAL (a bug). Listeners hear
 * every change after it happened and re-read what they need (level-triggered); the
 * worker reports each sandbox's record to the store from them (SandboxRecord).
 */
import { BerthError } from './errors.js';
import type { EndReason } from './supervision.js';
import type { TurnInFlight, TurnOutcome } from './turn-in-flight.js';

export type SandboxPhase = 'creating' | 'warm' | 'bound' | 'serving' | 'draining' | 'gone';

export const SANDBOX_TRANSITIONS: Readonly<Record<SandboxPhase, readonly SandboxPhase[]>> = {
  creating: ['warm', 'bound', 'draining'],
  warm: ['bound', 'draining'],
  bound: ['serving', 'draining'],
  serving: ['bound', 'draining'],
  draining: ['gone'],
  gone: [],
};

/** Why the warm pool ended a sandbox that no session took. */
export type PoolEndReason =
  /** Its create or start failed. */
  | 'StartFailed'
  /** It exited, or the worker stopped, while it was being created. */
  | 'EndedWhileStarting'
  /** It exited before any session took it. */
  | 'DiedInPool'
  /** Its runner did not ask for a binding for a minute. */
  | 'HungInPool'
  /** Demand fell: fewer warm sandboxes are wanted. */
  | 'PoolShrinking';

/**
 * Why a sandbox ended: its supervision's EndReason, the warm pool's, or WorkerLost (recorded
 * by the store: its worker died before it could say).
 */
export type SandboxEndReason = EndReason | PoolEndReason | 'WorkerLost';

/**
 * The ends berth chooses in the normal course (idle, a slot wanted, a drain, a recycle…).
 * Any other reason, one added later included, is a fault: what an operator should look at.
 */
const PLANNED_ENDS: ReadonlySet<SandboxEndReason> = new Set<SandboxEndReason>([
  'Idle',
  'NothingRunnable',
  'SandboxPerTurn',
  'SlotWanted',
  'Recycled',
  'WorkerStopping',
  'Drained',
  'Interrupted',
  'PoolShrinking',
]);

export function isPlannedEnd(reason: SandboxEndReason): boolean {
  return PLANNED_ENDS.has(reason);
}

export interface SandboxEnd {
  reason: SandboxEndReason;
  message: string;
}

/** The session a sandbox serves; given once, for its whole life. */
export interface SandboxBinding {
  sessionId: string;
  generation: number;
}

/** What the store holds of a sandbox: its worker's report of its lifecycle, the latest move winning. */
export interface SandboxRecord {
  name: string;
  workerId: string;
  phase: SandboxPhase;
  /** Started unbound for the warm pool (else cold, for its session). */
  pooled: boolean;
  sessionId: string | null;
  generation: number | null;
  /** The turn it serves (serving, or draining mid-turn). */
  turnId: string | null;
  endReason: SandboxEndReason | null;
  endMessage: string | null;
  createdAt: number;
  updatedAt: number;
  endedAt: number | null;
}

export function canMoveSandbox(from: SandboxPhase, to: SandboxPhase): boolean {
  return SANDBOX_TRANSITIONS[from].includes(to);
}

export class SandboxLifecycle {
  private current: SandboxPhase = 'creating';
  private inFlight: TurnInFlight | null = null;
  private handedOver = false;
  private runnerWaits = false;
  private boundTo: SandboxBinding | null = null;
  private end: SandboxEnd | null = null;
  private killedHard = false;
  private readonly createdAt: number;
  private updatedAt: number;
  private endedAt: number | null = null;
  private readonly listeners = new Set<() => void>();

  constructor(
    readonly name: string,
    private readonly o: {
      workerId: string;
      pooled: boolean;
      now: () => number;
      /** Told of every move once, where it happens (the worker logs it). */
      onMove?: (from: SandboxPhase, to: SandboxPhase, why: string) => void;
    },
  ) {
    this.createdAt = o.now();
    this.updatedAt = this.createdAt;
  }

  get phase(): SandboxPhase {
    return this.current;
  }

  /** The turn being served: set while serving (and while draining a sandbox that ended mid-turn). */
  get turn(): TurnInFlight | null {
    return this.inFlight;
  }

  /** The turn handed over that the runner has not received yet. */
  get offeredTurn(): TurnInFlight | null {
    return this.current === 'serving' && !this.handedOver ? this.inFlight : null;
  }

  /** Warm, and its runner waits on GET /v1/bind right now: a bind takes effect at once. */
  get ready(): boolean {
    return this.current === 'warm' && this.runnerWaits;
  }

  /** Its runner waits for a binding right now (a warm sandbox's readiness). */
  get runnerWaiting(): boolean {
    return this.runnerWaits && this.boundTo === null;
  }

  get binding(): SandboxBinding | null {
    return this.boundTo;
  }

  /** Bound to a session (between turns, serving one). */
  get isBound(): boolean {
    return this.current === 'bound' || this.current === 'serving';
  }

  get isEnding(): boolean {
    return this.current === 'draining' || this.current === 'gone';
  }

  /** Why it ends; null until it drains. */
  get ending(): SandboxEnd | null {
    return this.end;
  }

  /** Killed hard by self-fencing (once is enough). */
  get fenced(): boolean {
    return this.killedHard;
  }

  /** creating → warm: started unbound, for the pool. */
  warm(): void {
    this.move('warm', 'started unbound');
    this.changed();
  }

  /** creating or warm → bound: the sandbox serves this session from now on. */
  bind(binding: SandboxBinding): void {
    this.move('bound', `session ${binding.sessionId}`);
    this.boundTo = binding;
    this.changed();
  }

  /** bound → serving: the runner is handed this turn at its next (or waiting) GET /v1/turn. */
  serve(turn: TurnInFlight): void {
    this.move('serving', `turn ${turn.id}`);
    this.inFlight = turn;
    this.handedOver = false;
    this.changed();
  }

  /** The runner received the turn (its GET /v1/turn was answered with it). */
  handOver(turn: TurnInFlight): void {
    if (this.inFlight !== turn) return;
    this.handedOver = true;
    this.changed();
  }

  /** The turn's commit or abort is in the store (the gateway wrote it). */
  settleTurn(turn: TurnInFlight, outcome: TurnOutcome): void {
    if (this.inFlight !== turn) return;
    turn.outcome = outcome;
    this.changed();
  }

  /** serving → bound: the turn committed and the sandbox serves on. */
  turnDone(): void {
    this.move('bound', `turn ${this.inFlight?.id} committed`);
    this.inFlight = null;
    this.changed();
  }

  /** The runner waits for its binding, or stopped waiting (its long-poll answered or closed). */
  runnerWaitsForBind(waiting: boolean): void {
    if (this.runnerWaits === waiting) return;
    this.runnerWaits = waiting;
    this.changed();
  }

  /** → draining, once: later calls keep the first reason (it is why the sandbox ends). */
  drain(end: SandboxEnd): void {
    if (this.isEnding) return;
    this.move('draining', end.message);
    this.end = end;
    this.changed();
  }

  /** Self-fencing: drains it (if nothing ended it before) and says whether it is to be killed hard now; true once. */
  fence(): boolean {
    if (this.killedHard || this.current === 'gone') return false;
    this.drain({ reason: 'LeaseLost', message: 'self-fencing' });
    this.killedHard = true;
    this.changed();
    return true;
  }

  /** draining → gone: killed, its gateway closed and its files removed. */
  gone(): void {
    this.move('gone', this.end?.reason ?? 'gone');
    this.endedAt = this.updatedAt;
    this.changed();
  }

  record(workerId = this.o.workerId): SandboxRecord {
    return {
      name: this.name,
      workerId,
      phase: this.current,
      pooled: this.o.pooled,
      sessionId: this.boundTo?.sessionId ?? null,
      generation: this.boundTo?.generation ?? null,
      turnId: this.current === 'serving' || this.current === 'draining' ? (this.inFlight?.id ?? null) : null,
      endReason: this.end?.reason ?? null,
      endMessage: this.end?.message ?? null,
      createdAt: this.createdAt,
      updatedAt: this.updatedAt,
      endedAt: this.endedAt,
    };
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private move(to: SandboxPhase, why: string): void {
    const from = this.current;
    if (!canMoveSandbox(from, to))
      throw new BerthError('INTERNAL', `Sandbox ${this.name} cannot move from ${from} to ${to} (${why})`);
    this.current = to;
    this.updatedAt = this.o.now();
    this.o.onMove?.(from, to, why);
  }

  private changed(): void {
    for (const listener of [...this.listeners]) listener();
  }
}
