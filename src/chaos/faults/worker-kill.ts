/**
 * worker-kill: once, when `due()` says so, SIGKILL of `count` worker processes at once
 * (those running the most turns, and only workers running one, so that every kill hits
 * work), restarted with the same argv `restartDelayMs` later.
 *
 * Invariants:
 * - No worker is killed while the S3 daemon is down (it could not start again), and never
 *   the partitioned one.
 * - A kill that finds no worker running a turn within its wait is not injected (and not
 *   recorded: its kind shows fewer injections), rather than aimed at an idle worker.
 * - The restarts always happen, even when the injector stops first (settled() waits for them).
 */
import { sleep } from '../../core/index.js';
import type { KillableWorker, WorkerKill } from '../fault-records.js';
import { AimedFault, type AimedFaultOptions } from './fault-context.js';

export interface WorkerKillOptions extends AimedFaultOptions {
  workers: KillableWorker[];
  restartDelayMs: number;
  /** How many workers are SIGKILLed at once. @default 1 */
  count?: number;
}

export class WorkerKillFault extends AimedFault<WorkerKillOptions> {
  /** Once due, kills the workers running the most turns when `count` do, or those that do when the wait is over. */
  async tick(): Promise<void> {
    const { opts, ctx } = this;
    if (this.fault || ctx.blobsDown || !opts.due()) return;
    this.dueAt ??= ctx.clock.now();
    const count = opts.count ?? 1;
    const waited = ctx.clock.now() - this.dueAt >= opts.maxWaitForTurnsMs;
    const victims = await this.pick(count, this.dueAt);
    if (victims.length === count || waited) {
      if (victims.length < count)
        ctx.warn(
          `worker kill: ${count - victims.length} of ${count} not injected: no other worker ran a turn within ${opts.maxWaitForTurnsMs} ms`,
        );
      this.fault = victims.length > 0 ? this.kill(victims) : Promise.resolve();
    }
  }

  /** Up to `count` live workers running the most turns (ties at random); only workers running one. */
  private async pick(count: number, dueAt: number): Promise<KillableWorker[]> {
    const live = this.opts.workers.filter(
      (w) => w.pid !== undefined && w.workerId() !== this.ctx.partitioned,
    );
    const picked = await this.aim(live, count, dueAt);
    return picked.map((b) => b.worker);
  }

  private async kill(victims: KillableWorker[]): Promise<void> {
    const { ctx } = this;
    const records = victims.map(
      (victim): WorkerKill => ({
        kind: 'worker-kill',
        at: ctx.clock.now(),
        pid: victim.pid!,
        workerId: victim.workerId()!,
        child: victim.name,
        restartedAt: null,
        restartedPid: null,
      }),
    );
    ctx.comingBack += victims.length;
    await Promise.all(victims.map((v) => v.sigkill()));
    ctx.faults.push(...records);
    await sleep(this.opts.restartDelayMs);
    await Promise.all(
      victims.map(async (victim, i) => {
        try {
          await victim.restart();
          records[i]!.restartedAt = ctx.clock.now();
          records[i]!.restartedPid = victim.pid ?? null;
        } finally {
          ctx.comingBack--;
        }
      }),
    );
  }
}
