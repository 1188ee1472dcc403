/**
 * The lifecycle of one sandbox, written down once (docs/state-machine.md, "Sandbox"):
 *
 *   creating ──▶ warm ──▶ bound ⇄ serving
 *      │  └─────────────────▲ │       │
 *      └──────────┴─────────┴─┴───────┴──▶ draining ──▶ gone
 *
 * A pooled sandbox is created unbound (creating → warm) and bound when a session takes it;
 * a cold one is started for its session (creating → bound). Between turns it is bound;
 * while a turn runs it is serving, and the turn in flight is held here and nowhere else.
 * Whatever ends it (idle, exit, a kill, the worker stopping) moves it to draining, and
 * once it is killed and its files are removed it is gone.
 *
 * Invariants: one SandboxLifecycle per sandbox, from the start of its creation; the warm
 * pool, the session supervisor and the gateway read its phase here and keep no flag of
 * their own. A move the table does not allow throws INTERNAL (a bug). Listeners hear
 * every change after it happened and re-read what they need (level-triggered).
 */
import { BerthError } from './errors.js';
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

export function canMoveSandbox(from: SandboxPhase, to: SandboxPhase): boolean {
  return SANDBOX_TRANSITIONS[from].includes(to);
}

export class SandboxLifecycle {
  private current: SandboxPhase = 'creating';
  private inFlight: TurnInFlight | null = null;
  private readonly listeners = new Set<() => void>();

  constructor(
    readonly name: string,
    /** Told of every move once, where it happens (the worker logs it). */
    private readonly onMove: (from: SandboxPhase, to: SandboxPhase, why: string) => void = () => undefined,
  ) {}

  get phase(): SandboxPhase {
    return this.current;
  }

  /** The turn being served: set while serving (and while draining a sandbox that ended mid-turn). */
  get turn(): TurnInFlight | null {
    return this.inFlight;
  }

  /** Bound to a session (between turns, serving one, or ending after it was). */
  get isBound(): boolean {
    return this.current === 'bound' || this.current === 'serving';
  }

  get isEnding(): boolean {
    return this.current === 'draining' || this.current === 'gone';
  }

  moveTo(to: Exclude<SandboxPhase, 'serving'>, why: string): void {
    this.move(to, why);
    if (to === 'bound') this.inFlight = null;
    this.changed();
  }

  /** bound → serving: the runner is handed this turn at its next (or waiting) GET /v1/turn. */
  serve(turn: TurnInFlight): void {
    this.move('serving', `turn ${turn.id}`);
    this.inFlight = turn;
    this.changed();
  }

  /** The turn's commit or abort is in the store (the gateway wrote it). */
  settleTurn(turn: TurnInFlight, outcome: TurnOutcome): void {
    if (this.inFlight !== turn) return;
    turn.outcome = outcome;
    this.changed();
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
    this.onMove(from, to, why);
  }

  private changed(): void {
    for (const listener of [...this.listeners]) listener();
  }
}
