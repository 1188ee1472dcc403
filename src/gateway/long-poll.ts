/**
 * One held request at a time: the runner's long-poll for its binding or its next turn.
 * A newer request replaces (answers 204) the held one; a closed connection frees the slot;
 * after `holdMs` the request is answered 204 and the runner asks again.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export class LongPoll {
  private held: { res: ServerResponse; timer: NodeJS.Timeout } | null = null;

  constructor(
    private readonly holdMs: number,
    /** Told each time a request starts or stops being held. */
    private readonly onWaiting: (waiting: boolean) => void = () => undefined,
  ) {}

  get waiting(): boolean {
    return this.held !== null;
  }

  hold(req: IncomingMessage, res: ServerResponse): void {
    this.release();
    const timer = setTimeout(() => this.release(), this.holdMs);
    this.held = { res, timer };
    this.onWaiting(true);
    req.on('close', () => {
      if (this.held?.res === res) {
        clearTimeout(timer);
        this.held = null;
        this.onWaiting(false);
      }
    });
  }

  /** The held response, no longer held; null when none waits. */
  take(): ServerResponse | null {
    if (!this.held) return null;
    clearTimeout(this.held.timer);
    const { res } = this.held;
    this.held = null;
    this.onWaiting(false);
    return res;
  }

  /** Answers the held request 204 (nothing for you yet). */
  release(): void {
    this.take()?.writeHead(204).end();
  }
}
