/**
 * What the gateway holds for the turn its runner works on: the state the turn put and the
 * schedules it made, written only by that turn's commit (and dropped by its abort), and
 * whether its end has begun. Once the commit or abort has begun nothing more joins it,
 * and only the first end of the offered turn is accepted: a second or forged commit can
 * never touch a layer.
 */
import { BerthError, type TurnSchedule } from '../core/index.js';

const MAX_STATE_KEYS_PER_TURN = 1000;
const MAX_STATE_BYTES_PER_TURN = 1024 * 1024;

export class OpenTurn {
  readonly state: Record<string, unknown> = {};
  readonly schedules: TurnSchedule[] = [];
  private stateBytes = 0;
  private closing = false;

  constructor(readonly id: string) {}

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
  close(turnId: string, sessionId: string, operation: string): void {
    if (turnId !== this.id || this.closing)
      throw new BerthError('TURN_ENDED', `Turn ${turnId} of session ${sessionId} is not open (${operation})`);
    this.closing = true;
  }
}
