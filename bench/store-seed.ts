/**
 * Seeds a PostgreSQL store with many sessions in a few statements (generate_series on the
 * server), for the scale benchmark and its reduced run in the tests: seeding only; the load
 * itself goes through the real Store. What it writes is what the store's own transitions
 * would have left:
 * - every session has a history: one committed turn, its inbound message done, one reply;
 * - `runnable` sessions (every `sessions / runnable`-th) have one more inbound message,
 *   pending and due now, in session order, with the session's queue keys set to it;
 * - `busy` sessions are leased to the given workers (round robin), bound to a sandbox, with a
 *   running turn that holds one processing message.
 * The workers must be registered before (every lease holder has a row); seeding ends by
 * making their rows fresh (a long seed would leave them stale, and the first sweep would take
 * every busy session over).
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { recountSessionCounts } from '../src/store/sql/session-counts-ddl.js';

/** The tables whose triggers keep session_counts. */
const COUNTED_TABLES = ['sessions', 'messages', 'turns'];

export interface SeedPlan {
  sessions: number;
  runnable: number;
  /** Held by `workerIds`, each running a turn. */
  busy: number;
  workerIds: string[];
  agent: string;
  /** The seed's time, epoch ms (the store's clock): pending messages are due at it. */
  now: number;
}

/** `s` + the zero-padded number: ids sort as the sessions were made. */
export function sessionId(i: number): string {
  return `s${String(i).padStart(8, '0')}`;
}

export async function seedSessions(url: string, plan: SeedPlan): Promise<void> {
  // Every `every`-th session is runnable; the one after it is busy, as far as there are busy ones.
  const every = Math.floor(plan.sessions / plan.runnable);
  if (every < 2) throw new Error('seedSessions: at most half the sessions can be runnable');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const q = (sql: string, params: unknown[] = []) => client.query(sql, params);
  // Numbers are inlined (integers of the plan); the agent is quoted.
  const agent = client.escapeLiteral(plan.agent);
  const now = Math.round(plan.now);
  const n = `(SELECT i, 's' || lpad(i::text, 8, '0') AS sid,
      i % ${every} = 0 AS runnable,
      i % ${every} = ${1 % every} AND i / ${every} < ${Math.round(plan.busy)} AS busy
    FROM generate_series(1, ${Math.round(plan.sessions)}) AS i) AS n`;
  try {
    await q('BEGIN');
    // Counted once at the end (a trigger's upsert per seeded row would pile up row versions).
    for (const table of COUNTED_TABLES) await q(`ALTER TABLE ${table} DISABLE TRIGGER USER`);
    await q('CREATE TEMP TABLE seed_workers (n INTEGER PRIMARY KEY, id TEXT NOT NULL) ON COMMIT DROP');
    await q(
      'INSERT INTO seed_workers SELECT ordinality - 1, id FROM unnest($1::text[]) WITH ORDINALITY AS u(id)',
      [plan.workerIds],
    );
    await q(`INSERT INTO sessions (id, agent, tenant, generation, workspace_version, created_at, updated_at)
      SELECT sid, ${agent}, 'default', 1, 1, ${now} - 86400000 + i, ${now} FROM ${n}`);
    // History: one committed turn per session, its inbound message and its reply.
    await q(`INSERT INTO turns (id, session_id, attempt, generation, worker_id, status, message_ids, started_at, ended_at, base_version)
      SELECT 'turn-h-' || sid, sid, 1, 1, 'gone', 'committed', '[]',
        ${now} - 3600000 + i % 3000000, ${now} - 3600000 + i % 3000000 + 5000 + i % 20000, 0 FROM ${n}`);
    await q(`INSERT INTO messages (session_id, direction, text, status, tries, process_after, turn_id, created_at)
      SELECT sid, d.direction, CASE d.direction WHEN 'in' THEN 'hello' ELSE 'hi' END, 'done', d.tries,
        ${now} - 3600000, 'turn-h-' || sid, ${now} - 3600000 + i % 3000000
      FROM ${n} CROSS JOIN (VALUES ('in', 1), ('out', 0)) AS d(direction, tries) ORDER BY i, d.direction`);
    // Runnable: one pending message each, due now, in session order.
    await q(`INSERT INTO messages (session_id, direction, text, status, process_after, created_at)
      SELECT sid, 'in', 'next', 'pending', ${now}, ${now} FROM ${n} WHERE runnable ORDER BY i`);
    // Busy: leased to a worker (round robin), bound, running a turn on one processing message.
    await q(`UPDATE sessions s SET lease_owner = w.id, generation = 2, sandbox = 'sbx-' || n.sid
      FROM ${n} JOIN seed_workers w ON w.n = (n.i / ${every}) % ${plan.workerIds.length}
      WHERE n.busy AND s.id = n.sid`);
    await q(`INSERT INTO turns (id, session_id, attempt, generation, worker_id, sandbox, status, message_ids, started_at)
      SELECT 'turn-b-' || s.id, s.id, 1, 2, s.lease_owner, s.sandbox, 'running', '[]', ${now}
      FROM sessions s WHERE s.lease_owner IS NOT NULL`);
    await q(`INSERT INTO messages (session_id, direction, text, status, tries, process_after, turn_id, created_at)
      SELECT s.id, 'in', 'working', 'processing', 1, ${now}, 'turn-b-' || s.id, ${now}
      FROM sessions s WHERE s.lease_owner IS NOT NULL ORDER BY s.id`);
    // The queue keys the enqueue would have set.
    await q(`UPDATE sessions s SET queued_id = m.id, runnable_at = m.process_after FROM messages m
      WHERE m.session_id = s.id AND m.direction = 'in' AND m.status = 'pending'`);
    for (const table of COUNTED_TABLES) await q(`ALTER TABLE ${table} ENABLE TRIGGER USER`);
    await q(recountSessionCounts('postgres'));
    await q('COMMIT');
    await q('VACUUM ANALYZE');
    await q(
      'UPDATE workers SET heartbeat_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint WHERE id = ANY($1)',
      [plan.workerIds],
    );
  } catch (err) {
    await q('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    await client.end();
  }
}

/**
 * The same history in a SQLite store's file (its migrations applied): every session one
 * inbound message done and one reply; every `sessions / runnable`-th one more inbound
 * message, pending and due now, with its queue keys. No busy sessions (no workers run).
 */
export function seedSqliteSessions(path: string, plan: Omit<SeedPlan, 'busy' | 'workerIds'>): void {
  const every = Math.floor(plan.sessions / plan.runnable);
  const db = new Database(path);
  const now = Math.round(plan.now);
  const n = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${Math.round(plan.sessions)})
    SELECT i, 's' || substr('0000000' || i, -8, 8) AS sid FROM n`;
  try {
    db.transaction(() => {
      db.prepare(`INSERT INTO sessions (id, agent, tenant, generation, workspace_version, created_at, updated_at)
        SELECT sid, @agent, 'default', 1, 1, ${now} - 86400000 + i, ${now} FROM (${n})`).run({
        agent: plan.agent,
      });
      db.exec(`INSERT INTO messages (session_id, direction, text, status, tries, process_after, created_at)
        SELECT sid, d.direction, 'hello', 'done', 1, ${now} - 3600000, ${now} - 3600000 + i
        FROM (${n}) CROSS JOIN (SELECT 'in' AS direction UNION ALL SELECT 'out') AS d ORDER BY i, d.direction`);
      db.exec(`INSERT INTO messages (session_id, direction, text, status, process_after, created_at)
        SELECT sid, 'in', 'next', 'pending', ${now}, ${now} FROM (${n}) WHERE i % ${every} = 0 ORDER BY i`);
      db.exec(`UPDATE sessions SET
        queued_id = (SELECT m.id FROM messages m WHERE m.session_id = sessions.id AND m.status = 'pending'),
        runnable_at = ${now}
        WHERE id IN (SELECT session_id FROM messages WHERE status = 'pending')`);
    })();
    db.exec('ANALYZE');
  } finally {
    db.close();
  }
}
