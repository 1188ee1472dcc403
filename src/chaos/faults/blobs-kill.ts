/**
 * blobs-kill: once, when `due()` says so, the S3 daemon is SIGKILLed, left down `downMs`,
 * and started again.
 *
 * Invariants:
 * - Never while a worker or node is coming back (a worker refuses to start against an S3
 *   service that does not answer); while it is down, the context's `blobsDown` holds the
 *   worker and node kills back.
 * - The restart always happens, even when the injector stops first (settled() waits for it).
 */
import { downAndUp, ScheduledFault } from './fault-context.js';

export interface BlobsKillOptions {
  /** Polled every tick; once true (and no worker or node is coming back), the S3 daemon dies. */
  due(): boolean;
  kill(): Promise<void>;
  restart(): Promise<void>;
  downMs: number;
}

export class BlobsKillFault extends ScheduledFault<BlobsKillOptions> {
  async tick(): Promise<void> {
    const { opts, ctx } = this;
    if (this.fault || ctx.comingBack !== 0 || !opts.due()) return;
    ctx.blobsDown = true;
    this.fault = downAndUp(ctx, {
      kind: 'blobs-kill',
      down: () => opts.kill(),
      up: () => opts.restart(),
      downMs: opts.downMs,
      notUp: 'the S3 service',
    }).finally(() => {
      ctx.blobsDown = false;
    });
  }
}
