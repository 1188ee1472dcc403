/**
 * What a failover of a replicated PostgreSQL costs berth, with synchronous replication and
 * with asynchronous replication (the baseline: Patroni's default), measured in the same
 * run. Per mode one Patroni cluster (etcd and two members); per failover a fresh database,
 * WRITERS sessions enqueueing through the real store, the primary's postmaster SIGKILLed,
 * then the acknowledged writes the new primary does not hold are counted (`lost`), with
 * MTTD (the kill → the first failed store call) and MTTR (→ the first commit on the new
 * primary, after its promotion).
 *
 * Two cases per mode: the standby keeping up (same machine, no lag), and the standby fed
 * through a throttled link (LAG_KBIT: this kernel has no netem delay, so lag is made by
 * bandwidth), which lags behind the primary's writes; `lagBytesAtKill` says by how much.
 */

import pg from 'pg';
import { type PatroniCluster, startPatroniCluster } from '../src/chaos/index.js';
import { firstCommitAfter } from '../src/chaos/store-failover.js';
import { checkWrites, streamWrites } from '../src/chaos/write-stream.js';
import { agentSpecSchema } from '../src/core/index.js';
import { openPostgresStore } from '../src/store/index.js';
import { type BenchOptions, stats } from './harness.js';

const WRITERS = 8;
const LAG_KBIT = 200;
const RETRY = { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 };

export async function storeFailover({ quick }: BenchOptions) {
  const runs = quick ? 1 : 5;
  const modes: Record<string, unknown> = {};
  for (const synchronous of [true, false]) {
    const cluster = await startPatroniCluster({ synchronous });
    try {
      const failovers = [];
      for (let i = 0; i < runs; i++) failovers.push(await oneFailover(cluster, `${i}`, false));
      const lagged = await oneFailover(cluster, 'lag', true);
      modes[synchronous ? 'synchronous' : 'asynchronous'] = {
        noLag: {
          failovers: failovers.length,
          lostPerFailover: failovers.map((f) => f.lost),
          acknowledged: failovers.reduce((n, f) => n + f.acknowledged, 0),
          duplicated: failovers.reduce((n, f) => n + f.duplicated, 0),
          failedCalls: failovers.reduce((n, f) => n + f.failed, 0),
          mttdMs: stats(failovers.map((f) => f.mttdMs).filter((x): x is number => x !== null)),
          mttrMs: stats(failovers.map((f) => f.mttrMs).filter((x): x is number => x !== null)),
        },
        laggingStandby: { linkKbit: LAG_KBIT, ...lagged },
      };
    } finally {
      await cluster.remove();
    }
  }
  return {
    bench: 'store-failover',
    writers: WRITERS,
    synchronous: modes.synchronous,
    baselineAsynchronous: modes.asynchronous,
  };
}

async function oneFailover(cluster: PatroniCluster, name: string, lagging: boolean) {
  const database = `bench_failover_${name}`;
  const url = await cluster.createDatabase(database);
  const warnings: number[] = [];
  const store = await openPostgresStore({
    url,
    leaseMs: 10_000,
    retry: RETRY,
    onWarning: () => warnings.push(Date.now()),
  });
  await store.createAgent(agentSpecSchema.parse({ name: 'b', provider: 'command' }), store.clock.now());
  const leader = await cluster.waitForLeader();
  const standby = cluster.members.find((m) => m !== leader)!;
  if (lagging) await cluster.throttle(standby, LAG_KBIT);
  let kill = { member: leader, at: 0 };
  let lagBytesAtKill: number | null = null;
  let newLeader = leader;
  const writes = await streamWrites(store, {
    writers: WRITERS,
    agent: 'b',
    prefix: `w${name}`,
    stop: (async () => {
      await new Promise((r) => setTimeout(r, lagging ? 8000 : 2000));
      lagBytesAtKill = await replicationLagBytes(cluster.memberUrl(leader));
      kill = await cluster.killPrimaryPostmaster();
      await cluster.throttle(standby, null);
      newLeader = await cluster.waitForLeader({ notMember: kill.member, standby: false, timeoutMs: 90_000 });
      await new Promise((r) => setTimeout(r, 2000));
    })(),
  });
  try {
    const check = await checkWrites(store, writes);
    const promotedAt = await cluster.promotedAt(newLeader);
    const firstCommit =
      promotedAt === null ? null : await firstCommitAfter(cluster.memberUrl(newLeader, database), promotedAt);
    const firstFailure = warnings.find((at) => at >= kill.at) ?? null;
    return {
      acknowledged: writes.filter((w) => w.id !== null).length,
      lost: check.lost.length,
      duplicated: check.duplicated.length,
      failed: check.failed.length,
      lagBytesAtKill,
      mttdMs: firstFailure === null ? null : firstFailure - kill.at,
      mttrMs: firstCommit === null ? null : firstCommit - kill.at,
    };
  } finally {
    await store.close();
    // The old primary rejoins as a replica (pg_rewind) before the next failover.
    await cluster.waitForLeader({ timeoutMs: 120_000 });
  }
}

/** How far the standby's flushed WAL is behind the primary's, in bytes. */
async function replicationLagBytes(primaryUrl: string): Promise<number | null> {
  const client = new pg.Client({ connectionString: primaryUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ lag: string | null }>(
      'SELECT max(pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)) AS lag FROM pg_stat_replication',
    );
    return rows[0]!.lag === null ? null : Number(rows[0]!.lag);
  } finally {
    await client.end();
  }
}
