/**
 * Commit markers: how a PostgreSQL write learns whether its COMMIT landed when the answer
 * was lost (the connection broke after the COMMIT was sent: a server restart, a cut link,
 * the primary's death and a failover).
 *
 * A write transaction that changed rows inserts a random marker into commit_markers just
 * before its COMMIT, in the same simple query (no extra round trip), so the marker is
 * committed if and only if the transaction is. To settle a lost answer the driver inserts
 * the same marker itself, flagged `probe`, on another connection to whichever server is
 * the primary by then: the primary key makes that insert wait while the first
 * transaction is still in flight (a COMMIT the server is still working on, or waiting for
 * the synchronous standby), then find the transaction's row if it committed, or insert
 * its own if it was rolled back, after which it can never commit. The probe's row stays:
 * asking again (the probe's own answer lost) finds the same verdict, never the opposite.
 * The probe always writes (on a conflict it updates the row), so its own COMMIT waits for
 * the synchronous standby too: when it returns, the transaction it found committed is on
 * the standby as well, and survives a failover. A transaction that changed nothing
 * carries no marker and has nothing to lose: it is found not committed and run again.
 *
 * A marker is needed only until its writer has checked it, within its retry budget; a
 * write deletes those older than MARKER_TTL_SECONDS, once a minute per process, skipping
 * rows another process's prune holds.
 */
import { randomUUID } from 'node:crypto';
import type { Connection } from './primary-pool.js';

const MARKER_TTL_SECONDS = 300;
const PRUNE_INTERVAL_MS = 60_000;

const PRUNE = `DELETE FROM commit_markers WHERE marker IN (SELECT marker FROM commit_markers WHERE created_at < now() - interval '${MARKER_TTL_SECONDS} seconds' FOR UPDATE SKIP LOCKED)`;

export class CommitMarkers {
  private pruneDueAt = 0;

  /** A new marker and the query that ends its transaction: the marker if the transaction changed rows, a prune when due, COMMIT. */
  commit(): { marker: string; query: string } {
    const marker = randomUUID();
    // A UUID is hex and dashes: safe to inline (a simple query carries no parameters).
    const statements = [
      `INSERT INTO commit_markers (marker) SELECT CAST('${marker}' AS UUID) WHERE pg_current_xact_id_if_assigned() IS NOT NULL`,
    ];
    // Elapsed time on the monotonic timer: a wall-clock step must not stop or flood the pruning.
    const now = performance.now();
    if (now >= this.pruneDueAt) {
      this.pruneDueAt = now + PRUNE_INTERVAL_MS;
      statements.push(PRUNE);
    }
    statements.push('COMMIT');
    return { marker, query: statements.join('; ') };
  }
}

/** Whether the transaction that carried `marker` committed, once it is no longer in flight. The same answer every time it is asked. */
export async function markerCommitted(connection: Connection, marker: string): Promise<boolean> {
  const { rows } = await connection.query<{ probe: boolean }>(
    'INSERT INTO commit_markers (marker, probe) VALUES ($1, true) ON CONFLICT (marker) DO UPDATE SET probe = commit_markers.probe RETURNING probe',
    [marker],
  );
  return rows[0]!.probe === false;
}
