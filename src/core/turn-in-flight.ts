/**
 * The one in-process record of a turn while a sandbox serves it: the store's row, what the
 * runner is handed (whether it was is the lifecycle's serving state), what the turn wrote through the gateway
 * (state, schedules) and how it ended. The state and schedules are written only by that
 * turn's commit (and dropped by its abort); once the commit or abort has begun nothing
 * more joins it, and only the first end is accepted, so a second or forged commit can
 * never touch a layer.
 */
import { BerthError, type ErrorCode } from './errors.js';
import type { TurnAssignment } from './protocol.js';
import type { TurnSchedule } from './schedule.js';
import type { Turn } from './types.js';

const MAX_STATE_KEYS_PER_TURN = 1000;
const MAX_STATE_BYTES_PER_TURN = 1024 * 1024;

export type TurnOutcome = { kind: 'committed' } | { kind: 'aborted'; code: ErrorCode; error: string };

export class TurnInFlight {
  readonly state: Record<string, unknown> = {};
  readonly schedules: TurnSchedule[] = [];
  /** Set once the commit or abort is written to the store. */
  outcome: TurnOutcome | null = null;
  private stateBytes = 0;
  private closing = false;

  constructor(
    readonly row: Turn,
    readonly assignment: TurnAssignment,
  ) {}

  get id(): string {
    return this.row.id;
  }

  /** Accepting writes: its commit or abort has not begun. */
  get open(): boolean {
    return !this.closing;
  }

  assertOpen(what: string): void {
    if (this.closing)
      throw new BerthError('TURN_ENDED', `Turn ${this.id} is ending; ${what} can no longer be written`);
  }

  /** Holds a value for the commit (null deletes the key then), within the per-turn limits. */
  putState(key: string, value: unknown): void {
    this.assertOpen('state');
    const bytes = key.length + JSON.stringify(value ?? null).length;
    if (!(key in this.state) && Object.keys(this.state).length >= MAX_STATE_KEYS_PER_TURN)
      throw new BerthError('STATE_TOO_LARGE', `A turn may put at most ${MAX_STATE_KEYS_PER_TURN} state keys`);
    if (this.stateBytes + bytes > MAX_STATE_BYTES_PER_TURN)
      throw new BerthError(
        'STATE_TOO_LARGE',
        `A turn may put at most ${MAX_STATE_BYTES_PER_TURN} bytes of state`,
      );
    this.stateBytes += bytes;
    this.state[key] = value;
  }

  /** Claims the right to end this turn, once; `turnId` must be this turn's. */
  close(turnId: string, operation: string): void {
    if (turnId !== this.id || this.closing)
      throw new BerthError(
        'TURN_ENDED',
        `Turn ${turnId} of session ${this.row.sessionId} is not open (${operation})`,
      );
    this.closing = true;
  }
}
