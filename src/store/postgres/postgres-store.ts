/**
 * PostgreSQL implementation of the Store: the shared SQL transitions (../sql/sql-store.ts)
 * over a connection pool, each in one READ COMMITTED transaction whose session rows are
 * locked first (see statements.ts), so many workers on many machines share one database.
 * Writes, reads and lease renewals each wait for connections of their own (one pool,
 * three gates): no read can hold up a write.
 *
 * The database may be replicated with automatic failover: the URL may name several hosts
 * (libpq's syntax), and connections go only to the writable primary (primary-pool.ts),
 * found again whenever a connection is lost or the server turns read-only.
 *
 * Connection loss: a transaction that failed before its COMMIT was sent was rolled back
 * by the server, so it is run again from the start (with backoff, for up to the retry
 * budget), as are serialization failures, deadlocks and writes a demoted primary
 * refused. A COMMIT whose answer was lost is settled by its commit marker
 * (commit-marker.ts) once a primary answers again, within the same budget, on whichever
 * host is the primary by then: committed, the call returns what the transaction computed;
 * rolled back, it is run again. Only a store that stays away past the budget surfaces as
 * STORE_UNAVAILABLE. Callers already handle a failed store call: the worker logs it and
 * fences itself when it cannot renew for a lease, and a turn whose commit failed is
 * aborted and retried (a commit that did land makes that abort stale, so nothing is
 * doubled). No statement is ever cancelled: a stuck connection is dropped instead
 * (server-watch.ts).
 */
import pg from 'pg';
import {
  type Backoff,
  BerthError,
  type Clock,
  parsePostgresUrl,
  type RetryPolicy,
  redactUrl,
  retryUntil,
} from '../../core/index.js';
import { type Op, type OpResult, type Program, runProgram, type StatementName } from '../sql/program.js';
import { type SqlDriver, SqlStore } from '../sql/sql-store.js';
import * as shared from '../sql/statements.js';
import type { StoreChange } from '../store.js';
import { CHANNEL, ChangeListener, newStoreTag, notifyPayloads } from './change-channel.js';
import { CommitMarkers, markerCommitted } from './commit-marker.js';
import { isAbsent, isConnectionError, isNotPrimary, isRetryable } from './connection-errors.js';
import { ConnectionGate } from './connection-gate.js';
import { DatabaseClock } from './database-clock.js';
import { migrate } from './migrations.js';
import { type PositionalStatement, positionalValues, toPositional } from './named-params.js';
import { type Connection, PrimaryPool } from './primary-pool.js';
import { POSTGRES_STATEMENTS } from './statements.js';
import { STORE_WARNINGS } from './store-warnings.js';

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database, or several hosts: postgres://user@h1:5432,h2:5432/database?target_session_attrs=read-write */
  url: string;
  /** A lease holder whose worker row is older than this is dead. */
  leaseMs: number;
  /** Applied to the messages of every aborted turn. */
  retry: RetryPolicy;
  /** Told of connection trouble the store rides out (listener lost, transaction retried). */
  onWarning?: (message: string, err: unknown) => void;
  /** This machine's clock, which the store's clock corrects to the server's. @default Date.now */
  localClock?: Clock;
  /** How long a call retries a database that does not answer before it fails, ms. @default RETRY_BUDGET_MS (30 s) */
  retryBudgetMs?: number;
}

/** Connections per process for writes: a worker's claim loop, sweep, gateways and the API's POSTs share them. */
const POOL_SIZE = 10;
/**
 * Connections for reads (listings, status, the change feed, a stream catching up), behind a
 * gate of their own: a burst of reads queues behind reads, never in front of a write, so a
 * POST is answered whatever the streams and dashboards ask at the time.
 */
const READ_CONNECTIONS = 4;
/**
 * Connections kept for lease renewals, outside the FIFO gate: measured under chaos on a
 * loaded machine, a renewal queued behind other calls (or behind a sweep in the same
 * loop) arrived late often enough to fence live workers.
 */
const RENEWAL_CONNECTIONS = 1;
const CONNECT_TIMEOUT_MS = 5000;
/** How long a call may queue for a connection (ConnectionGate) before the store counts as down. */
const GATE_MAX_WAIT_MS = 120_000;
/**
 * How long a transition keeps retrying a lost connection before it fails: long enough for
 * a database restart, or a failover of a replicated one, to look like latency to an API
 * client. Patroni with `ttl: 10` takes 12–14 s to promote a standby when the primary's
 * machine is lost (measured: docs/store.md). A worker's self-fencing runs on its own
 * timer, so a renewal stuck this long does not delay it.
 */
export const RETRY_BUDGET_MS = 30_000;
const RETRY_BACKOFF: Backoff = { firstMs: 50, maxMs: 1000 };
/** While no host is a writable primary (a failover under way), look again at least every LOCATE_MAX_DELAY_MS. */
const LOCATE_MAX_DELAY_MS = 250;
const LOCATE_BACKOFF: Backoff = { firstMs: 50, maxMs: LOCATE_MAX_DELAY_MS };
/**
 * A transaction left idle this long (a fraction of the lease) is ended by the server: a
 * worker cut off mid-transaction (a partition) must not hold session rows past its lease,
 * or the sweep of the live workers (SKIP LOCKED) would pass them by until it came back.
 */
const IDLE_IN_TRANSACTION_LEASE_FRACTION = 1 / 3;
const IDLE_IN_TRANSACTION_MIN_MS = 500;

const STATEMENTS = new Map<StatementName, PositionalStatement>(
  Object.entries({ ...shared, ...POSTGRES_STATEMENTS } satisfies Record<StatementName, string>).map(
    ([name, text]) => [name as StatementName, toPositional(text)],
  ),
);

/** Epoch milliseconds and ids are BIGINT: read them as numbers (exact up to 2^53). */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** Connects, applies missing migrations (once, under an advisory lock) and starts listening. */
export async function openPostgresStore(options: PostgresStoreOptions): Promise<SqlStore> {
  const parsed = parsePostgresUrl(options.url);
  if (!parsed.ok)
    throw new BerthError('CONFIG_INVALID', `Invalid PostgreSQL URL ${redactUrl(options.url)}: ${parsed.why}`);
  const config: pg.ClientConfig = {
    types: TYPES,
    keepAlive: true,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idle_in_transaction_session_timeout: Math.max(
      IDLE_IN_TRANSACTION_MIN_MS,
      Math.round(options.leaseMs * IDLE_IN_TRANSACTION_LEASE_FRACTION),
    ),
    application_name: 'berth',
  };
  const warn = options.onWarning ?? (() => undefined);
  // One more for the clock's samples, taken outside every gate: a renewal never waits for a connection.
  const primaries = new PrimaryPool(
    parsed.target,
    config,
    POOL_SIZE + READ_CONNECTIONS + RENEWAL_CONNECTIONS + 1,
    warn,
  );
  const clock = new DatabaseClock(async () => {
    const connection = await primaries.connect();
    try {
      const { rows } = await connection.query('SELECT extract(epoch FROM clock_timestamp()) * 1000 AS ms');
      connection.release();
      return Number(rows[0]!.ms);
    } catch (err) {
      connection.release(err);
      throw err;
    }
  }, options.localClock);
  try {
    // A database that restarts or fails over just now is waited for, as by every call; one
    // that is not there at all, or refuses these credentials or this database, fails at once.
    await retryWithin(
      options.retryBudgetMs ?? RETRY_BUDGET_MS,
      async () => {
        await migrate(primaries);
        await clock.sync();
      },
      (err) => isRetryable(err) && !isAbsent(err),
      warn,
    );
  } catch (err) {
    await primaries.end().catch(() => undefined);
    throw new BerthError(
      'STORE_UNAVAILABLE',
      `Cannot open the PostgreSQL store at ${redactUrl(options.url)}: ${(err as Error).message || String(err)}`,
      { cause: err },
    );
  }
  const onClockError = (err: unknown) => warn(STORE_WARNINGS.clockUnread, err);
  clock.start(onClockError);
  // Another server's clock: the samples of the old one say nothing about it.
  primaries.onPrimaryChanged(() => clock.resync(onClockError));
  return new SqlStore(
    new PostgresDriver(primaries, warn, clock, options.retryBudgetMs ?? RETRY_BUDGET_MS),
    options,
  );
}

class PostgresDriver implements SqlDriver {
  readonly kind = 'postgres' as const;
  private listener: ChangeListener | null = null;
  private readonly tag = newStoreTag();
  private readonly gate = new ConnectionGate(POOL_SIZE, GATE_MAX_WAIT_MS);
  private readonly readGate = new ConnectionGate(READ_CONNECTIONS, GATE_MAX_WAIT_MS);
  private readonly renewals = new ConnectionGate(RENEWAL_CONNECTIONS, GATE_MAX_WAIT_MS);
  private readonly markers = new CommitMarkers();

  constructor(
    private readonly primaries: PrimaryPool,
    private readonly warn: (message: string, err: unknown) => void,
    /** Leases are judged by the server's clock: every `now` comes from it. */
    readonly clock: DatabaseClock,
    private readonly retryBudgetMs: number,
  ) {}

  /**
   * Every write is durable here, the relaxed ones too: workers on other machines outlive a
   * database crash, and a claim (generation) lost with it could be handed out twice.
   */
  write<T>(program: (changes: StoreChange[]) => Program<T>): Promise<{ value: T; changes: StoreChange[] }> {
    type Result = { value: T; changes: StoreChange[] };
    /** A COMMIT whose answer was lost: its marker and what the transaction computed before it, until settled. */
    let unsettled: { marker: string; result: Result } | null = null;
    return this.gatedWithRetries(async () => {
      if (unsettled) {
        const { marker, result } = unsettled;
        if (await this.committed(marker)) return result;
        unsettled = null; // rolled back: run it again
      }
      const connection = await this.primaries.connect();
      const end = this.markers.commit();
      /** Set once the program ran: the COMMIT is being sent. */
      let computed: Result | null = null;
      try {
        await connection.query('BEGIN');
        const changes: StoreChange[] = [];
        const value = await runProgram(program(changes), (op) => execute(connection, op));
        computed = { value, changes };
        await connection.query(end.query);
      } catch (err) {
        // Lost: a COMMIT sent may or may not have landed. Refused (a read-only server): it did not.
        const broken = isConnectionError(err);
        if (!broken) await connection.query('ROLLBACK').catch(() => undefined);
        connection.release(err);
        if (computed && broken) {
          unsettled = { marker: end.marker, result: computed };
          throw new CommitOutcomeUnknown(err);
        }
        throw err;
      }
      await this.sendHints(connection, computed.changes);
      return computed;
    });
  }

  /**
   * A committed write's hints, after its COMMIT, in one statement that is a transaction of
   * its own: PostgreSQL serializes the commits of transactions that NOTIFY, their WAL flush
   * included, so a NOTIFY inside the writes would let every writer of the fleet commit only
   * one at a time (measured: docs/scale-out.md). Hints are best effort: one lost with its
   * connection costs the polling floor, so the write still returns what it committed.
   */
  private async sendHints(connection: Connection, changes: StoreChange[]): Promise<void> {
    const payloads = notifyPayloads(this.tag, changes);
    try {
      if (payloads.length > 0)
        await connection.query('SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload', [
          CHANNEL,
          payloads,
        ]);
      connection.release();
    } catch (err) {
      connection.release(err);
      this.warn(STORE_WARNINGS.hintsLost, err);
    }
  }

  /** Not in a transaction, as SQLite's reads: each statement sees what was committed when it ran. */
  read<T>(program: () => Program<T>): Promise<T> {
    return this.readGate.run(() =>
      this.withRetries(() =>
        this.onConnection((client) => runProgram(program(), (op) => execute(client, op))),
      ),
    );
  }

  /**
   * On a connection of the renewals' own (the pool holds one beyond the gate's permits), one
   * statement at a time in autocommit: one round trip, no commit marker (a renewal whose
   * answer was lost is simply made again), retried within its own short budget.
   */
  renew<T>(program: () => Program<T>, budgetMs: number): Promise<T> {
    return this.renewals.run(() =>
      retryWithin(
        budgetMs,
        () => this.onConnection((client) => runProgram(program(), (op) => execute(client, op))),
        isRetryable,
        this.warn,
      ),
    );
  }

  listen(deliver: (change: StoreChange) => void): void {
    const listener = new ChangeListener(
      () => this.primaries.connectOwn(),
      this.tag,
      deliver,
      (err) => this.warn(STORE_WARNINGS.listenerLost, err),
    );
    this.listener = listener;
    // It follows the primary: a failover found by any call moves it at once.
    this.primaries.onPrimaryChanged((url) => listener.follow(url));
    listener.start();
  }

  async close(): Promise<void> {
    this.clock.stop();
    await this.listener?.stop();
    await this.primaries.end();
  }

  /** Whether the transaction that carried `marker` committed; the outcome stays unknown while the database does not answer. */
  private async committed(marker: string): Promise<boolean> {
    try {
      return await this.onConnection((client) => markerCommitted(client, marker));
    } catch (err) {
      throw new CommitOutcomeUnknown(err);
    }
  }

  /** Runs `work` on a connection to the primary; one that broke is dropped, not given back to the pool. */
  private async onConnection<T>(work: (connection: Connection) => Promise<T>): Promise<T> {
    const connection = await this.primaries.connect();
    try {
      const value = await work(connection);
      connection.release();
      return value;
    } catch (err) {
      connection.release(err);
      throw err;
    }
  }

  /** One permit for the whole call, retries included: the retry budget then counts only failures, not queueing. */
  private gatedWithRetries<T>(attempt: () => Promise<T>): Promise<T> {
    return this.gate.run(() => this.withRetries(attempt));
  }

  private withRetries<T>(attempt: () => Promise<T>): Promise<T> {
    return retryWithin(this.retryBudgetMs, attempt, isRetryable, this.warn);
  }
}

/**
 * Runs `attempt` again after each failure `retryable` accepts (a lost COMMIT answer always:
 * its marker is checked next), with backoff, until it succeeds or `budgetMs` would pass:
 * then STORE_UNAVAILABLE. Each retry is told to `warn`.
 */
async function retryWithin<T>(
  budgetMs: number,
  attempt: () => Promise<T>,
  retryable: (err: unknown) => boolean,
  warn: (message: string, err: unknown) => void,
): Promise<T> {
  return retryUntil(attempt, {
    retryable: (err) => err instanceof CommitOutcomeUnknown || retryable(err),
    backoff: (err) =>
      isNotPrimary(err instanceof CommitOutcomeUnknown ? err.cause : err) ? LOCATE_BACKOFF : RETRY_BACKOFF,
    // A budget of elapsed time: the monotonic timer, which a wall-clock step cannot stretch or cut.
    deadline: performance.now() + budgetMs,
    now: () => performance.now(),
    onRetry: (err) =>
      warn(
        err instanceof CommitOutcomeUnknown ? STORE_WARNINGS.commitAnswerLost : STORE_WARNINGS.retrying,
        err,
      ),
    spent: (err) => budgetSpent(err, budgetMs),
  });
}

async function execute(connection: Connection, op: Op): Promise<OpResult> {
  const statement = STATEMENTS.get(op.statement)!;
  // Named: prepared once per connection.
  const result = await connection.query({
    name: op.statement,
    text: statement.text,
    values: positionalValues(statement, op.params),
  });
  switch (op.kind) {
    case 'get':
      return result.rows[0];
    case 'all':
      return result.rows;
    case 'run':
      return result.rowCount ?? 0;
  }
}

/** The answer to a COMMIT was lost and its commit marker not yet checked. */
class CommitOutcomeUnknown extends Error {
  constructor(cause: unknown) {
    super(`COMMIT outcome unknown: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

function budgetSpent(err: unknown, budgetMs: number): BerthError {
  if (err instanceof CommitOutcomeUnknown)
    return storeUnavailable(
      `the answer to a COMMIT was lost and the database did not answer for ${budgetMs} ms`,
      err.cause,
      'The database went away while this write committed: it may or may not have been applied. Read it back before repeating it.',
    );
  return storeUnavailable(`retried for ${budgetMs} ms`, err);
}

function storeUnavailable(why: string, cause: unknown, hint?: string): BerthError {
  return new BerthError(
    'STORE_UNAVAILABLE',
    `PostgreSQL store unavailable (${why}): ${(cause as Error)?.message ?? String(cause)}`,
    { cause, hint },
  );
}
