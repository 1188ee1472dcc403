/**
 * The outages of the services berth depends on, each injected once per entry and always
 * ended, even when the run stops first (the injector waits for them): the S3 daemon
 * SIGKILLed and started again, the store's database restarted, a replicated store's
 * primary killed (a failover, with the times MTTR is measured from).
 */
import { type Clock, sleep } from '../core/index.js';
import type { BlobsKill, Fault, PrimaryDeath, StoreFailover, StoreRestart } from './fault-records.js';

export interface BlobsOutage {
  /** Polled every tick; once true (and no worker or node is coming back), the S3 daemon dies. */
  due(): boolean;
  kill(): Promise<void>;
  restart(): Promise<void>;
  downMs: number;
}

export interface StoreRestartOutage {
  /** Polled every tick; once true, the store is restarted. */
  due(): boolean;
  stop(): Promise<void>;
  start(): Promise<void>;
  downMs: number;
}

export interface StoreFailoverOutage {
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

/** Where an outage records itself and says what went wrong. */
export interface OutageContext {
  clock: Clock;
  faults: Fault[];
  warn(message: string): void;
}

/** How long a failover may take before the injector stops waiting for a new primary, or for berth's first commit on it. */
const FAILOVER_WAIT_MS = 60_000;
const FIRST_COMMIT_POLL_MS = 100;

export function killBlobs(o: BlobsOutage, ctx: OutageContext): Promise<void> {
  const record: BlobsKill = { kind: 'blobs-kill', at: ctx.clock.now(), upAt: null };
  return downAndUp(ctx, {
    record,
    down: () => o.kill(),
    up: () => o.restart(),
    downMs: o.downMs,
    notUp: 'the S3 service',
  });
}

export function restartStore(o: StoreRestartOutage, ctx: OutageContext): Promise<void> {
  const record: StoreRestart = { kind: 'store-restart', at: ctx.clock.now(), upAt: null };
  return downAndUp(ctx, {
    record,
    down: () => o.stop(),
    up: () => o.start(),
    downMs: o.downMs,
    notUp: 'the store',
  });
}

/** Records the outage, takes the service down for `downMs`, and always brings it up again (`upAt`: when it answered). */
async function downAndUp(
  ctx: OutageContext,
  o: {
    record: BlobsKill | StoreRestart;
    down(): Promise<void>;
    up(): Promise<void>;
    downMs: number;
    /** What did not start again, for the warning. */
    notUp: string;
  },
): Promise<void> {
  ctx.faults.push(o.record);
  try {
    await o.down();
    await sleep(o.downMs);
  } finally {
    await o.up().then(
      () => {
        o.record.upAt = ctx.clock.now();
      },
      (err: unknown) => ctx.warn(`${o.notUp} did not start again: ${(err as Error).message}`),
    );
  }
}

export async function failOver(
  outage: StoreFailoverOutage,
  what: PrimaryDeath,
  ctx: OutageContext,
): Promise<void> {
  let killed: { member: string; at: number };
  try {
    killed = await outage.kill(what);
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
    const promoted = await outage.waitForNewPrimary(killed.member, FAILOVER_WAIT_MS);
    record.newPrimary = promoted.member;
    // Seen leading now, so promoted by now at the latest.
    record.promotedAt = promoted.promotedAt ?? ctx.clock.now();
    const deadline = ctx.clock.now() + FAILOVER_WAIT_MS;
    while (record.firstCommitAt === null && ctx.clock.now() < deadline) {
      record.firstCommitAt = await outage
        .firstCommitAfter(promoted.member, record.promotedAt)
        .catch(() => null);
      if (record.firstCommitAt === null) await sleep(FIRST_COMMIT_POLL_MS);
    }
  } catch (err) {
    ctx.warn(`store failover: ${(err as Error).message}`);
  } finally {
    // Always bring the cluster back whole, so a later fault (or the checker) finds it.
    if (what === 'member')
      await outage
        .restartMember(killed.member)
        .catch((err: unknown) =>
          ctx.warn(`store failover: ${killed.member} did not start again: ${(err as Error).message}`),
        );
    await outage
      .waitForStandby()
      .catch((err: unknown) =>
        ctx.warn(`store failover: no synchronous standby again: ${(err as Error).message}`),
      );
  }
}
