/**
 * store-restart: once, when `due()` says so, the store's database server is stopped (fast
 * shutdown: connections cut), left down `downMs`, and started again.
 *
 * Invariant: the start always happens, even when the injector stops first (settled()
 * waits for it).
 */
import { downAndUp, ScheduledFault } from './fault-context.js';

export interface StoreRestartOptions {
  /** Polled every tick; once true, the store is restarted. */
  due(): boolean;
  stop(): Promise<void>;
  start(): Promise<void>;
  downMs: number;
}

export class StoreRestartFault extends ScheduledFault<StoreRestartOptions> {
  async tick(): Promise<void> {
    const { opts, ctx } = this;
    if (this.fault || !opts.due()) return;
    this.fault = downAndUp(ctx, {
      kind: 'store-restart',
      down: () => opts.stop(),
      up: () => opts.start(),
      downMs: opts.downMs,
      notUp: 'the store',
    });
  }
}
