/**
 * Applies the shared migrations (../sql/migrations.ts, where new ones are added) to a
 * SQLite file, each in its own transaction.
 */
import type Database from 'better-sqlite3';
import { migrationsFor } from '../sql/migrations.js';

/** Each migration in its own IMMEDIATE transaction that re-reads what is applied: processes starting together apply it once. */
export function migrate(db: Database.Database): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
  );
  for (const m of migrationsFor('sqlite')) {
    db.transaction(() => {
      if (db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version)) return;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        m.version,
        m.name,
        Date.now(),
      );
    }).immediate();
  }
}
