/**
 * How long a replicated store's failover took, as berth lived it:
 *   MTTD  the primary killed → the first failed store call a berth process logged (its
 *         store's FAILED_CALL_WARNINGS, in the pino lines of the children's logs);
 *   MTTR  the primary killed → berth's first commit on the new primary (the time its
 *         commit marker was inserted, by the server's clock, just before its COMMIT).
 * Both clocks are this machine's: the children and the database run here.
 *
 * Invariants: read-only; the logs come read (child-logs.ts); a log line that is not JSON, or
 * not one of those warnings, is skipped.
 */
import pg from 'pg';
import { parseJsonLines } from '../core/index.js';
import { FAILED_CALL_WARNINGS } from '../store/index.js';

/** The time of the first berth commit after `at` on the server at `primaryUrl` (one host), or null. */
export async function firstCommitAfter(primaryUrl: string, at: number): Promise<number | null> {
  const client = new pg.Client({ connectionString: primaryUrl, connectionTimeoutMillis: 2000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ at: string | null }>(
      'SELECT extract(epoch FROM min(created_at)) * 1000 AS at FROM commit_markers WHERE NOT probe AND created_at > to_timestamp($1 / 1000.0)',
      [at],
    );
    return rows[0]!.at === null ? null : Math.round(Number(rows[0]!.at));
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The time of the first failed store call logged in any of these logs in [from, to), or null. */
export function firstFailedCallAfter(logs: string[], from: number, to: number): number | null {
  let first: number | null = null;
  for (const log of logs) {
    for (const entry of parseJsonLines(log, { skipInvalid: true }) as ({
      time?: unknown;
      msg?: unknown;
    } | null)[]) {
      if (typeof entry !== 'object' || entry === null) continue;
      const time = Number(entry.time);
      if (!FAILED_CALL_WARNINGS.includes(String(entry.msg)) || !(time >= from && time < to)) continue;
      if (first === null || time < first) first = time;
    }
  }
  return first;
}
