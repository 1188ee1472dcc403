/**
 * Reports this worker's sandboxes to the store: each lifecycle's record (phase, binding,
 * turn, end reason) after every move, coalesced per sandbox, in one write per batch (a
 * second), off the turn's path. A record is a report of what the worker did, not a transition: the lease
 * and the generation stay what fences, so a store that is away delays the reports (they are
 * kept and sent once it is back), never a turn. The sandboxes of a worker that died are
 * recorded gone by the store (WorkerLost).
 */
import type { Logger } from 'pino';
import {
  backoffMs,
  type Clock,
  type SandboxLifecycle,
  type SandboxRecord,
  sleep,
  WakeSignal,
} from '../core/index.js';
import type { WorkerStore } from '../store/index.js';

/**
 * Moves within this long go in one write: at most one write a second per worker, however
 * many turns it serves (on SQLite every write waits for the one writer, turns' commits too).
 */
const BATCH_MS = 1000;
const RETRY_BACKOFF = { firstMs: 500, maxMs: 10_000 };
/** How long a stopping worker tries to send its last reports. */
const FINAL_FLUSH_MS = 5_000;

export class SandboxReports {
  /** The latest record of each sandbox not yet written. */
  private readonly due = new Map<string, SandboxRecord>();
  private readonly wake = new WakeSignal();
  private stopped = false;
  private readonly stopping = new AbortController();
  private loop: Promise<void> | null = null;

  constructor(
    private readonly store: Pick<WorkerStore, 'recordSandboxes'>,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** Reports every move of this sandbox, until it is gone. */
  track(lifecycle: SandboxLifecycle): void {
    let last = '';
    const report = () => {
      const record = lifecycle.record();
      // Readiness flips with every long-poll: only what the record holds is worth a write.
      const key = `${record.phase}|${record.turnId}|${record.endReason}`;
      if (key === last) return;
      last = key;
      this.due.set(record.name, record);
      this.wake.notify();
      if (record.phase === 'gone') unsubscribe();
    };
    const unsubscribe = lifecycle.onChange(report);
    report();
  }

  start(): void {
    this.loop = this.flushLoop();
  }

  /** Sends what is left (for a few seconds at most) and stops. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    this.wake.notify();
    await this.loop;
    const deadline = performance.now() + FINAL_FLUSH_MS;
    while (this.due.size > 0 && performance.now() < deadline)
      if (!(await this.flush())) await sleep(RETRY_BACKOFF.firstMs);
    if (this.due.size > 0) this.log.warn({ unsent: this.due.size }, 'Sandbox reports not sent at stop');
  }

  private async flushLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      // While the store is away, moves wait for the backoff rather than each trying a write.
      if (failures > 0) await sleep(backoffMs(failures, RETRY_BACKOFF), this.stopping.signal);
      else await this.wake.wait(60_000);
      if (this.stopped) return;
      await sleep(BATCH_MS, this.stopping.signal);
      failures = (await this.flush()) ? 0 : failures + 1;
    }
  }

  /** One write of every due record; false when it failed (they stay due, unless a newer move replaced them). */
  private async flush(): Promise<boolean> {
    if (this.due.size === 0) return true;
    const batch = [...this.due.values()];
    this.due.clear();
    try {
      await this.store.recordSandboxes(batch, this.clock.now());
      return true;
    } catch (err) {
      for (const record of batch) if (!this.due.has(record.name)) this.due.set(record.name, record);
      this.log.warn({ err, due: this.due.size }, 'Sandbox reports not written; trying again');
      return false;
    }
  }
}
