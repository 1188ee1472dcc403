/**
 * Applies the shared migrations (../sql/migrations.ts) to a PostgreSQL database, each
 * translated by toPostgresDdl and in its own transaction. Processes starting together
 * (workers on several machines) take one advisory lock first, so each migration is
 * applied exactly once.
 */

import { migrationsFor, toPostgresDdl } from '../sql/migrations.js';
import type { Connection } from './primary-pool.js';

/** Any fixed number, the same in every berth process: the key of the migration lock. */
const MIGRATION_LOCK_KEY = 0x6265727468;

/** Holds the advisory lock on one connection while it applies what is missing; released (or dropped with the connection) after. */
export async function migrate(pool: { connect(): Promise<Connection> }): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
      );
      const applied = new Set(
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map(
          (r) => r.version,
        ),
      );
      for (const m of migrationsFor('postgres')) {
        if (applied.has(m.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(toPostgresDdl(m.sql));
          await client.query(
            'INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)',
            [m.version, m.name, Date.now()],
          );
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    }
  } finally {
    client.release();
  }
}
