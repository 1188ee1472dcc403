/**
 * PostgreSQL implementation of the Store: the shared SQL transitions (../sql/sql-store.ts)
 * over a connection pool, each in one READ COMMITTED transaction whose session rows are
 * locked first (see statements.ts), so many workers on many machines share one database.
 *
 * Connection loss: a transaction that failed before its COMMIT was sent was rolled back
 * by the server, so it is run again from the start (with backoff, for up to
 * RETRY_BUDGET_MS), as are serialization failures and deadlocks. A COMMIT whose answer
 * was lost is settled by its commit marker (commit-marker.ts) once the database answers
 * again, within the same budget: committed, the call returns what the transaction
 * computed; rolled back, it is run again. Only a store that stays away past the budget
 * surfaces as STORE_UNAVAILABLE. Callers already handle a failed store call: the worker
 * logs it and fences itself when it cannot renew for a lease, and a turn whose commit
 * failed is aborted and retried (a commit that did land makes that abort stale, so
 * nothing is doubled).
 */
import pg from 'pg';
import { BerthError, type Clock, type RetryPolicy, redactUrl } from '../../core/index.js';
import { type Op, type OpResult, type Program, runProgram, type StatementName } from '../sql/program.js';
import { type SqlDriver, SqlStore } from '../sql/sql-store.js';
import * as shared from '../sql/statements.js';
import type { StoreChange } from '../store.js';
import { CHANNEL, ChangeListener, newStoreTag, notifyPayloads } from './change-channel.js';
import { CommitMarkers, markerCommitted } from './commit-marker.js';
import { ConnectionGate } from './connection-gate.js';
import { DatabaseClock } from './database-clock.js';
import { migrate } from './migrations.js';
import { type PositionalStatement, positionalValues, toPositional } from './named-params.js';
import { POSTGRES_STATEMENTS } from './statements.js';

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database */
  url: string;
  /** A lease holder whose worker row is older than this is dead. */
  leaseMs: number;
  /** Applied to the messages of every aborted turn. */
  retry: RetryPolicy;
  /** Told of connection trouble the store rides out (listener lost, transaction retried). */
  onWarning?: (message: string, err: unknown) => void;
  /** This machine's clock, which the store's clock corrects to the server's. @default Date.now */
  localClock?: Clock;
}

/** Connections per process: a worker's claim loop, renewals, gateways and the API share them. */
const POOL_SIZE = 10;
const CONNECT_TIMEOUT_MS = 5000;
/** How long a call may queue for a connection (ConnectionGate) before the store counts as down. */
const GATE_MAX_WAIT_MS = 120_000;
/**
 * How long a transition keeps retrying a lost connection before it fails: long enough for
 * a database restart to look like latency to an API client. A worker's self-fencing runs
 * on its own timer, so a renewal stuck this long does not delay it.
 */
const RETRY_BUDGET_MS = 10_000;
const RETRY_FIRST_DELAY_MS = 50;
const RETRY_MAX_DELAY_MS = 1000;
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
  const config: pg.ClientConfig = {
    connectionString: options.url,
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
  const pool = new pg.Pool({ ...config, max: POOL_SIZE });
  // An idle connection that dies (server restart) is dropped by the pool; the next query opens a new one.
  pool.on('error', (err) => warn('Idle PostgreSQL connection lost', err));
  // A checked-out connection between two statements has no query to fail: without a listener
  // its 'error' (e.g. 57P01 at a server restart) would crash the process. The next
  // statement on it fails, and the transaction is retried on a new connection.
  pool.on('connect', (client) => client.on('error', (err) => warn('PostgreSQL connection lost', err)));
  const clock = new DatabaseClock(async () => {
    const { rows } = await pool.query('SELECT extract(epoch FROM clock_timestamp()) * 1000 AS ms');
    return Number(rows[0].ms);
  }, options.localClock);
  try {
    await migrate(pool);
    await clock.sync();
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new BerthError(
      'STORE_UNAVAILABLE',
      `Cannot open the PostgreSQL store at ${redactUrl(options.url)}: ${(err as Error).message || String(err)}`,
      { cause: err },
    );
  }
  clock.start((err) => warn('Could not read the database clock; keeping the last offset', err));
  return new SqlStore(new PostgresDriver(pool, config, warn, clock), options);
}

class PostgresDriver implements SqlDriver {
  readonly kind = 'postgres' as const;
  private listener: ChangeListener | null = null;
  private readonly tag = newStoreTag();
  private readonly gate = new ConnectionGate(POOL_SIZE, GATE_MAX_WAIT_MS);
  private readonly markers = new CommitMarkers();

  constructor(
    private readonly pool: pg.Pool,
    private readonly config: pg.ClientConfig,
    private readonly warn: (message: string, err: unknown) => void,
    /** Leases are judged by the server's clock: every `now` comes from it. */
    readonly clock: DatabaseClock,
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
      const client = await this.pool.connect();
      const end = this.markers.commit();
      /** Set once the program ran: the COMMIT is being sent. */
      let computed: Result | null = null;
      try {
        await client.query('BEGIN');
        const changes: StoreChange[] = [];
        const value = await runProgram(program(changes), (op) => execute(client, op));
        for (const payload of notifyPayloads(this.tag, changes))
          await client.query('SELECT pg_notify($1, $2)', [CHANNEL, payload]);
        computed = { value, changes };
        await client.query(end.query);
        client.release();
        return computed;
      } catch (err) {
        const broken = isConnectionError(err);
        if (!broken) await client.query('ROLLBACK').catch(() => undefined);
        client.release(broken ? (err as Error) : undefined);
        if (computed && broken) {
          unsettled = { marker: end.marker, result: computed };
          throw new CommitOutcomeUnknown(err);
        }
        throw err;
      }
    });
  }

  /** Not in a transaction, as SQLite's reads: each statement sees what was committed when it ran. */
  read<T>(program: () => Program<T>): Promise<T> {
    return this.gatedWithRetries(() =>
      this.onConnection((client) => runProgram(program(), (op) => execute(client, op))),
    );
  }

  listen(deliver: (change: StoreChange) => void): void {
    this.listener = new ChangeListener(this.config, this.tag, deliver, (err) =>
      this.warn('PostgreSQL change listener lost its connection; reconnecting', err),
    );
    this.listener.start();
  }

  async close(): Promise<void> {
    this.clock.stop();
    await this.listener?.stop();
    await this.pool.end();
  }

  /** Whether the transaction that carried `marker` committed; the outcome stays unknown while the database does not answer. */
  private async committed(marker: string): Promise<boolean> {
    try {
      return await this.onConnection((client) => markerCommitted(client, marker));
    } catch (err) {
      throw new CommitOutcomeUnknown(err);
    }
  }

  /** Runs `work` on a pooled connection; one that broke is dropped, not given back to the pool. */
  private async onConnection<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      const value = await work(client);
      client.release();
      return value;
    } catch (err) {
      client.release(isConnectionError(err) ? (err as Error) : undefined);
      throw err;
    }
  }

  /** One permit for the whole call, retries included: the retry budget then counts only failures, not queueing. */
  private gatedWithRetries<T>(attempt: () => Promise<T>): Promise<T> {
    return this.gate.run(() => this.withRetries(attempt));
  }

  private async withRetries<T>(attempt: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + RETRY_BUDGET_MS;
    for (let delayMs = RETRY_FIRST_DELAY_MS; ; delayMs = Math.min(2 * delayMs, RETRY_MAX_DELAY_MS)) {
      try {
        return await attempt();
      } catch (err) {
        if (!isRetryable(err)) throw err;
        if (Date.now() + delayMs > deadline) throw budgetSpent(err);
        this.warn(
          err instanceof CommitOutcomeUnknown
            ? 'The answer to a PostgreSQL COMMIT was lost; checking its commit marker'
            : 'PostgreSQL transaction failed; retrying',
          err,
        );
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    }
  }
}

async function execute(client: pg.PoolClient, op: Op): Promise<OpResult> {
  const statement = STATEMENTS.get(op.statement)!;
  // Named: prepared once per connection.
  const result = await client.query({
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

function budgetSpent(err: unknown): BerthError {
  if (err instanceof CommitOutcomeUnknown)
    return storeUnavailable(
      `the answer to a COMMIT was lost and the database did not answer for ${RETRY_BUDGET_MS} ms`,
      err.cause,
      'The database went away while this write committed: it may or may not have been applied. Read it back before repeating it.',
    );
  return storeUnavailable(`retried for ${RETRY_BUDGET_MS} ms`, err);
}

function storeUnavailable(why: string, cause: unknown, hint?: string): BerthError {
  return new BerthError(
    'STORE_UNAVAILABLE',
    `PostgreSQL store unavailable (${why}): ${(cause as Error)?.message ?? String(cause)}`,
    { cause, hint },
  );
}

/** SQLSTATE classes and socket errors meaning the connection, not the statement, failed. */
const CONNECTION_CODES = new Set([
  '25P03', // idle_in_transaction_session_timeout: the server ended the session (rolled back)
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);

function isConnectionError(err: unknown): boolean {
  const code = String((err as { code?: unknown })?.code ?? '');
  if (CONNECTION_CODES.has(code) || code.startsWith('08') || code.startsWith('57P')) return true;
  // node-postgres reports a dropped socket or a connect timeout without a code.
  return (
    err instanceof Error &&
    /Connection terminated|connection error|timeout exceeded when trying to connect|Client was closed/i.test(
      err.message,
    )
  );
}

/** Safe to try again: rolled back by the server (a lost connection, a serialization failure, a deadlock), or a lost COMMIT answer whose marker is still to be checked. */
function isRetryable(err: unknown): boolean {
  const code = String((err as { code?: unknown })?.code ?? '');
  return (
    err instanceof CommitOutcomeUnknown || code === '40001' || code === '40P01' || isConnectionError(err)
  );
}
