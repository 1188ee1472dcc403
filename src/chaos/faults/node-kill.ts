/**
 * node-kill: once, when `due()` says so, `count` nodes (chaos-node.ts: worker, engine,
 * containers, disk) die at once, those running the most turns (never an idle one), and
 * come back empty `restartDelayMs` later (a replacement machine).
 *
 * Invariants:
 * - No node is killed while the S3 daemon is down (its worker could not start again).
 * - A kill that finds fewer nodes running a turn within its wait kills only those (warned),
 *   and none when none does.
 * - Every killed node is started again, even when the injector stops first (settled()
 *   waits for it); one that does not come back is warned of, and its record says so.
 */
import { sleep } from '../../core/index.js';
import type { KillableNode, NodeKill } from '../fault-records.js';
import { AimedFault, type AimedFaultOptions } from './fault-context.js';

export interface NodeKillOptions extends AimedFaultOptions {
  nodes: KillableNode[];
  /** How many nodes die at once. */
  count: number;
  restartDelayMs: number;
}

export class NodeKillFault extends AimedFault<NodeKillOptions> {
  /** Once due, kills the nodes running the most turns when `count` do, or those that do when the wait is over. */
  async tick(): Promise<void> {
    const { opts, ctx } = this;
    if (this.fault || ctx.blobsDown || !opts.due()) return;
    this.dueAt ??= ctx.clock.now();
    const waited = ctx.clock.now() - this.dueAt >= opts.maxWaitForTurnsMs;
    const victims = await this.aim(opts.nodes, opts.count, this.dueAt);
    if (victims.length === opts.count || waited) {
      if (victims.length < opts.count)
        ctx.warn(
          `node kill: ${opts.count - victims.length} of ${opts.count} not injected: no other node ran a turn within ${opts.maxWaitForTurnsMs} ms`,
        );
      this.fault = victims.length > 0 ? this.kill(victims.map((v) => v.worker)) : Promise.resolve();
    }
  }

  private async kill(victims: KillableNode[]): Promise<void> {
    const { ctx } = this;
    const at = ctx.clock.now();
    const records = victims.map(
      (victim): NodeKill => ({
        kind: 'node-kill',
        at,
        node: victim.name,
        workerId: victim.workerId()!,
        deadAt: null,
        droppedAt: null,
        restartedAt: null,
      }),
    );
    ctx.comingBack += victims.length;
    ctx.faults.push(...records);
    await Promise.all(
      victims.map(async (victim, i) => {
        try {
          await victim.kill();
          records[i]!.deadAt = ctx.clock.now();
          await victim.wipe();
          records[i]!.droppedAt = ctx.clock.now();
          await sleep(this.opts.restartDelayMs);
          await victim.restart();
          records[i]!.restartedAt = ctx.clock.now();
        } catch (err) {
          ctx.warn(`node ${victim.name} did not come back: ${(err as Error).message}`);
        } finally {
          ctx.comingBack--;
        }
      }),
    );
  }
}
