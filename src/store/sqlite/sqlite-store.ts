/**
 * SQLite implementation of the Store: the shared SQL transitions (../sql/sql-store.ts) run
 * synchronously by better-sqlite3, each in one BEGIN IMMEDIATE transaction, so two
 * writers never deadlock on a lock upgrade. WAL + busy timeout so several processes can
 * share one file; a file-backed store relays its notifications to the other processes.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { type RetryPolicy, systemClock } from '../../core/index.js';
import { type Op, type OpResult, type Program, runProgramSync, type StatementName } from '../sql/program.js';
import { type Durability, type SqlDriver, SqlStore } from '../sql/sql-store.js';
import * as shared from '../sql/statements.js';
import type { StoreChange } from '../store.js';
import { ChangeRelay } from './change-relay.js';
import { migrate } from './migrations.js';
import { StatementCache } from './statement-cache.js';
import { SQLITE_STATEMENTS } from './statements.js';

export interface SqliteStoreOptions {
  path: string;
  /** A lease holder whose worker row is older than this is dead. */
  leaseMs: number;
  /** Applied to the messages of every aborted turn. */
  retry: RetryPolicy;
  /** Told of a transition that found a row in a state its guard rules out (a bug: see SqlStore.write). */
  onWarning?: (message: string, err: unknown) => void;
}

const SQL: Record<StatementName, string> = { ...shared, ...SQLITE_STATEMENTS };

/** Opens (and migrates) the store. */
export function openSqliteStore(options: SqliteStoreOptions): SqlStore {
  if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
  const db = new Database(options.path);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  // FULL: an accepted (202) message must survive a power cut, not only a process crash.
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  migrate(db);
  return new SqlStore(new SqliteDriver(db, options.path !== ':memory:'), options);
}

class SqliteDriver implements SqlDriver {
  readonly kind = 'sqlite' as const;
  /** One machine, one clock. */
  readonly clock = systemClock;
  private readonly q: StatementCache;
  private relay: ChangeRelay | null = null;
  /** The connection's PRAGMA synchronous (FULL from open). */
  private synchronous: 'FULL' | 'NORMAL' = 'FULL';

  constructor(
    private readonly db: Database.Database,
    private readonly fileBacked: boolean,
  ) {
    this.q = new StatementCache(db);
  }

  /**
   * Durable: PRAGMA synchronous = FULL, the WAL is fsynced at the commit. Relaxed: NORMAL,
   * no fsync of its own; the WAL is append-only, so the next durable commit persists it
   * too, and a process crash never loses it. Only a power cut can, which also kills every
   * worker and sandbox on this machine (SQLite is one machine's store); recovery then
   * redoes or undoes each relaxed transition. A warm turn pays two fsyncs instead of four.
   */
  async write<T>(program: (changes: StoreChange[]) => Program<T>, durability: Durability) {
    const level = durability === 'durable' ? 'FULL' : 'NORMAL';
    if (level !== this.synchronous) {
      this.db.pragma(`synchronous = ${level}`);
      this.synchronous = level;
    }
    const changes: StoreChange[] = [];
    const value = this.db
      .transaction(() => runProgramSync(program(changes), (op) => this.execute(op)))
      .immediate();
    this.relay?.publish(changes);
    return { value, changes };
  }

  async read<T>(program: () => Program<T>): Promise<T> {
    return runProgramSync(program(), (op) => this.execute(op));
  }

  /** One connection, used synchronously: nothing of this process is ever queued ahead of a renewal. */
  async renew<T>(program: () => Program<T>): Promise<T> {
    return (await this.write(() => program(), 'relaxed')).value;
  }

  listen(deliver: (change: StoreChange) => void): void {
    if (!this.fileBacked) return;
    this.relay = new ChangeRelay(this.db, deliver);
    this.relay.start();
  }

  async close(): Promise<void> {
    this.relay?.stop();
    this.db.close();
  }

  private execute(op: Op): OpResult {
    const text = SQL[op.statement];
    switch (op.kind) {
      case 'get':
        return this.q.get(text, op.params);
      case 'all':
        return this.q.all(text, op.params);
      case 'run':
        return this.q.run(text, op.params).changes;
    }
  }
}
