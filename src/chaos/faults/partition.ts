/**
 * partition: once, when `due()` says so, the network link of the worker running the most
 * turns (never an idle one) is cut (its namespace's veth, worker-network.ts) for
 * `durationMs` (longer than the lease), then healed. A lease after the cut the fault looks
 * at the sandboxes that ran that worker's turns at the cut: the worker must have killed
 * them itself by then (self-fencing), before anyone else may take its sessions over.
 *
 * Invariants:
 * - A partition that finds no worker running a turn within its wait is not injected (and
 *   not recorded), rather than aimed at an idle worker.
 * - The heal always happens, even when the injector stops first (settled() waits for it).
 * - While cut, the worker is the context's `partitioned` one, which a worker kill spares.
 */
import { sleep } from '../../core/index.js';
import type { Partition, PartitionableWorker } from '../fault-records.js';
import { AimedFault, type AimedFaultOptions, runningSandboxes } from './fault-context.js';

export interface PartitionOptions extends AimedFaultOptions {
  workers: PartitionableWorker[];
  /** How long the link stays cut: longer than the lease. */
  durationMs: number;
  leaseMs: number;
}

export class PartitionFault extends AimedFault<PartitionOptions> {
  /** Once due, cuts off the worker running the most turns, or gives up when none did within the wait. */
  async tick(): Promise<void> {
    const { opts, ctx } = this;
    if (this.fault || !opts.due()) return;
    this.dueAt ??= ctx.clock.now();
    const [victim] = await this.aim(opts.workers, 1, this.dueAt);
    if (victim) this.fault = this.cutOff(victim.worker, victim.sandboxes);
    else if (ctx.clock.now() - this.dueAt >= opts.maxWaitForTurnsMs) {
      ctx.warn(`partition not injected: no worker ran a turn within ${opts.maxWaitForTurnsMs} ms`);
      this.fault = Promise.resolve();
    }
  }

  private async cutOff(victim: PartitionableWorker, sandboxes: string[]): Promise<void> {
    const { opts, ctx } = this;
    const record: Partition = {
      kind: 'partition',
      at: ctx.clock.now(),
      workerId: victim.workerId()!,
      child: victim.name,
      sandboxes,
      sandboxesAliveAfterLease: null,
      healedAt: null,
    };
    ctx.partitioned = record.workerId;
    try {
      await victim.cut();
      ctx.faults.push(record);
      await sleep(record.at + opts.leaseMs - ctx.clock.now());
      record.sandboxesAliveAfterLease = await this.stillRunning(sandboxes).catch((err: unknown) => {
        ctx.warn(`partition: cannot list sandboxes: ${(err as Error).message}`);
        return null;
      });
      await sleep(record.at + opts.durationMs - ctx.clock.now());
    } finally {
      await victim.heal().then(
        () => {
          record.healedAt = ctx.clock.now();
        },
        (err: unknown) => ctx.warn(`partition: link did not come up: ${(err as Error).message}`),
      );
      ctx.partitioned = null;
    }
  }

  /** How many of these containers are running. */
  private async stillRunning(names: string[]): Promise<number> {
    const running = new Set(
      (await runningSandboxes(this.ctx)).flatMap((c) => c.info.Names.map((n) => n.replace(/^\//, ''))),
    );
    return names.filter((n) => running.has(n)).length;
  }
}
