/**
 * store-failover: when `due(k)` says so for the k-th one, the primary of a replicated store
 * (Patroni) dies: its postmaster SIGKILLed (Patroni lives on, fails over and brings the old
 * primary back as a replica), or its whole machine lost (link cut, then Patroni and
 * PostgreSQL SIGKILLed; started again once another member leads). The fault records when
 * a new primary led and when berth first committed on it (MTTR), and waits for a
 * synchronous standby again before the next one.
 *
 * Invariant: the cluster is always brought back whole (a lost member started again, a
 * standby waited for), even when the injector stops first (settled() waits for it), so a
 * later fault, or the checker, finds it.
 */
import { sleep } from '../../core/index.js';
import type { PrimaryDeath, StoreFailover } from '../fault-records.js';
import { ScheduledFault } from './fault-context.js';

export interface StoreFailoverOptions {
  /** One failover per entry, in order. */
  deaths: PrimaryDeath[];
  /** Polled every tick with the index of the next one; once true, it happens (after the previous one settled). */
  due(index: number): boolean;
  /** Kills the primary that way; returns the member and when. */
  kill(what: PrimaryDeath): Promise<{ member: string; at: number }>;
  /** Resolves with the member that leads once it is not `notMember`, and when it was promoted (null: unknown); rejects after `timeoutMs`. */
  waitForNewPrimary(
    notMember: string,
    timeoutMs: number,
  ): Promise<{ member: string; promotedAt: number | null }>;
  /** The first berth commit on `member` after `at` (epoch ms), or null if none yet. */
  firstCommitAfter(member: string, at: number): Promise<number | null>;
  /** Starts a lost member again (it rejoins as a replica). */
  restartMember(member: string): Promise<void>;
  /** Resolves once the cluster has a primary and a synchronous standby again (bounded). */
  waitForStandby(): Promise<void>;
}

/** How long a failover may take before the fault stops waiting for a new primary, or for berth's first commit on it. */
const FAILOVER_WAIT_MS = 60_000;
const FIRST_COMMIT_POLL_MS = 100;

export class StoreFailoverFault extends ScheduledFault<StoreFailoverOptions> {
  /** How many failovers were started; `fault` is the one under way (or the last one). */
  private started = 0;
  private over = true;

  /** Starts the next failover once it is due and the one before it is over. */
  async tick(): Promise<void> {
    const { opts } = this;
    if (!this.over || this.started >= opts.deaths.length || !opts.due(this.started)) return;
    this.over = false;
    this.fault = this.failOver(opts.deaths[this.started++]!).finally(() => {
      this.over = true;
    });
  }

  private async failOver(what: PrimaryDeath): Promise<void> {
    const { opts, ctx } = this;
    let killed: { member: string; at: number };
    try {
      killed = await opts.kill(what);
    } catch (err) {
      ctx.warn(`store failover: could not kill the primary: ${(err as Error).message}`);
      return;
    }
    const record: StoreFailover = {
      kind: 'store-failover',
      what,
      member: killed.member,
      at: killed.at,
      newPrimary: null,
      promotedAt: null,
      firstCommitAt: null,
      firstFailureAt: null,
    };
    ctx.faults.push(record);
    try {
      const promoted = await opts.waitForNewPrimary(killed.member, FAILOVER_WAIT_MS);
      record.newPrimary = promoted.member;
      // Seen leading now, so promoted by now at the latest.
      record.promotedAt = promoted.promotedAt ?? ctx.clock.now();
      const deadline = ctx.clock.now() + FAILOVER_WAIT_MS;
      while (record.firstCommitAt === null && ctx.clock.now() < deadline) {
        record.firstCommitAt = await opts
          .firstCommitAfter(promoted.member, record.promotedAt)
          .catch(() => null);
        if (record.firstCommitAt === null) await sleep(FIRST_COMMIT_POLL_MS);
      }
    } catch (err) {
      ctx.warn(`store failover: ${(err as Error).message}`);
    } finally {
      // Always bring the cluster back whole, so a later fault (or the checker) finds it.
      if (what === 'member')
        await opts
          .restartMember(killed.member)
          .catch((err: unknown) =>
            ctx.warn(`store failover: ${killed.member} did not start again: ${(err as Error).message}`),
          );
      await opts
        .waitForStandby()
        .catch((err: unknown) =>
          ctx.warn(`store failover: no synchronous standby again: ${(err as Error).message}`),
        );
    }
  }
}
