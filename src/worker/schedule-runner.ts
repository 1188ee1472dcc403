/**
 * Sends the due runs of scheduled messages: every tick it asks the store to run
 * what is due. Every host process runs one (API-only hosts and workers alike); the store
 * moves each due run on by compare-and-set in the transaction that enqueues it, so a run
 * is sent once however many processes tick, and a host that was down sends (or skips, by
 * the schedule's policy) what fell due meanwhile at its first tick.
 */
import type { Logger } from 'pino';
import type { Clock } from '../core/index.js';
import type { ScheduleRunnerStore } from '../store/index.js';

/** How often due schedules are looked for: the lateness of a run, at most. */
const TICK_MS = 1_000;

export class ScheduleRunner {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly store: ScheduleRunnerStore,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.tick();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  private tick(): void {
    if (this.running) return; // a slow store: never two passes at once
    this.running = this.store
      .runDueSchedules(this.clock.now())
      .then(({ fired, skipped }) => {
        if (fired.length || skipped.length) this.log.info({ fired, skipped }, 'Scheduled runs handled');
      })
      .catch((err: unknown) => this.log.error({ err }, 'Scheduled runs failed'))
      .finally(() => {
        this.running = null;
      });
  }
}
