/**
 * Connections to the primary of a PostgreSQL that may fail over (Patroni, CloudNativePG, a
 * managed HA service), from the hosts of one multi-host URL (core/postgres-url.ts).
 *
 * One pg pool at a time, on the host found to be the primary. With several hosts it is
 * found by asking all of them at once (connect, then `pg_is_in_recovery()` and
 * `transaction_read_only`); the first writable one wins. Every new connection is checked
 * the same way before its first use (one host, or a server demoted since it was found),
 * unless `target_session_attrs=any`. A call whose connection fails with a connection
 * error or finds the server read-only (25006) hands the error back with the connection:
 * the connection is destroyed, never pooled again, and the host's pool is given up, so
 * the next call looks for the primary again (a failover: another host; a restart: the
 * same one). A statement whose server stops answering is dropped by the ServerWatch, which
 * then counts as such a connection error.
 *
 * Invariants: at most one search for the primary in flight, shared by every caller that
 * needs it; a failure of a connection of an older pool never gives up a newer one;
 * nothing here cancels a statement.
 */
import pg from 'pg';
import { type PostgresTarget, parsePostgresUrl } from '../../core/index.js';
import {
  endedSessionOnly,
  isConnectionError,
  isNotPrimary,
  NotPrimaryError,
  ServerGivenUpError,
} from './connection-errors.js';
import { quickClient, ServerWatch } from './server-watch.js';
import { STORE_WARNINGS } from './store-warnings.js';

/** How long asking one host whether it is the primary may take while the others are asked. */
const PROBE_TIMEOUT_MS = 2000;

type QueryText = string | pg.QueryConfig;

/** A checked-out connection to the primary; every statement is watched (server-watch.ts). */
export interface Connection {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    query: QueryText,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>;
  /** Back to the pool. Pass the error it failed with, if any: a lost connection is destroyed and its server given up. */
  release(err?: unknown): void;
}

/** A connection of its own, outside the pool (the LISTEN connection). */
export interface OwnConnection {
  /** For its events: 'notification', 'error', 'end'. */
  client: pg.Client;
  query: Connection['query'];
  /** The host's URL it is connected to. */
  url: string;
}

interface HostPool {
  url: string;
  pool: pg.Pool;
  /** Set when given up: its pool is ended. */
  givenUp: boolean;
}

export class PrimaryPool {
  private current: HostPool | null = null;
  private locating: Promise<HostPool> | null = null;
  /** The host the last search found, to tell a failover from a reconnect. */
  private lastUrl: string | null = null;
  private readonly checked = new WeakSet<pg.ClientBase>();
  private readonly listeners = new Set<(url: string) => void>();
  private readonly watch: ServerWatch;
  private ended = false;
  /** A connection to a primary has worked at least once. */
  private reached = false;

  constructor(
    private readonly target: PostgresTarget,
    /** Settings of every connection, without the host (connectionString). */
    private readonly config: pg.ClientConfig,
    private readonly maxConnections: number,
    private readonly warn: (message: string, err: unknown) => void,
  ) {
    this.watch = new ServerWatch(config, (url) =>
      warn(STORE_WARNINGS.stuckConnectionDropped, new Error(redactHost(url))),
    );
  }

  /** A connection to the primary. Fails with a retryable error while none is reachable or writable. */
  async connect(): Promise<Connection> {
    const host = await this.host();
    let client: pg.PoolClient;
    try {
      client = await host.pool.connect();
    } catch (err) {
      if (host.givenUp)
        throw new ServerGivenUpError('Connection not opened: its server was given up meanwhile', {
          cause: err,
        });
      this.giveUp(host, err);
      throw err;
    }
    if (!this.checked.has(client)) {
      try {
        await this.watched(host.url, client, checkTarget(client, this.target));
        this.checked.add(client);
        this.reached = true;
      } catch (err) {
        client.release(true);
        this.giveUp(host, err);
        throw err;
      }
    }
    return {
      query: (query, values) => this.watched(host.url, client, send(client, query, values)),
      release: (err) => {
        if (err === undefined || !(isConnectionError(err) || isNotPrimary(err))) return client.release();
        client.release(err instanceof Error ? err : true);
        if (!endedSessionOnly(err)) this.giveUp(host, err);
      },
    };
  }

  /** A connection of its own to the primary, checked like a pooled one; the caller ends it. */
  async connectOwn(): Promise<OwnConnection> {
    const host = await this.host();
    const client = new pg.Client({ ...this.config, connectionString: host.url });
    try {
      await client.connect();
      await this.watched(host.url, client, checkTarget(client, this.target));
      this.reached = true;
    } catch (err) {
      void client.end().catch(() => undefined);
      this.giveUp(host, err);
      throw err;
    }
    return {
      client,
      url: host.url,
      query: (query, values) => this.watched(host.url, client, send(client, query, values)),
    };
  }

  /** Called with the new host's URL whenever a search finds the primary on another host than before. */
  onPrimaryChanged(listener: (url: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async end(): Promise<void> {
    this.ended = true;
    const host = this.current;
    this.current = null;
    if (host && !host.givenUp) {
      host.givenUp = true;
      await host.pool.end();
    }
  }

  private host(): Promise<HostPool> {
    if (this.ended) return Promise.reject(new Error('Client was closed: the store is closed'));
    if (this.current) return Promise.resolve(this.current);
    this.locating ??= this.locate().finally(() => {
      this.locating = null;
    });
    return this.locating;
  }

  private async locate(): Promise<HostPool> {
    const urls = this.target.hostUrls;
    // One host: no one to choose from; its connections are checked one by one as they open.
    const url = urls.length === 1 ? urls[0]! : await this.firstWritable(urls);
    const host: HostPool = { url, pool: this.newPool(url), givenUp: false };
    if (this.ended) {
      await host.pool.end();
      throw new Error('Client was closed: the store is closed');
    }
    this.current = host;
    const moved = this.lastUrl !== null && this.lastUrl !== url;
    this.lastUrl = url;
    if (moved) for (const listener of this.listeners) listener(url);
    return host;
  }

  /** Asks every host at once; the first writable one (any, with target_session_attrs=any) wins. */
  private async firstWritable(urls: string[]): Promise<string> {
    try {
      return await Promise.any(urls.map((url) => probe(url, this.config, this.target).then(() => url)));
    } catch (err) {
      const why = (err as AggregateError).errors.map(
        (e: unknown, i: number) => `${redactHost(urls[i]!)}: ${(e as Error)?.message ?? String(e)}`,
      );
      throw new NotPrimaryError(`No host is a writable primary (${why.join('; ')})`, { cause: err });
    }
  }

  private newPool(url: string): pg.Pool {
    const pool = new pg.Pool({ ...this.config, connectionString: url, max: this.maxConnections });
    // An idle connection that dies (server restart) is dropped by the pool; the next query opens a new one.
    // pg-pool hangs the whole client on the error (err.client): a log line of kilobytes.
    pool.on('error', (err: Error & { client?: unknown }) => {
      delete err.client;
      this.warn(STORE_WARNINGS.idleConnectionLost, err);
    });
    // A checked-out connection between two statements has no query to fail: without a listener
    // its 'error' (e.g. 57P01 at a server restart) would crash the process. The next
    // statement on it fails, and the transaction is retried on a new connection.
    pool.on('connect', (client) =>
      client.on('error', (err) => this.warn(STORE_WARNINGS.connectionLost, err)),
    );
    return pool;
  }

  /** The host failed: its pool is ended (idle connections now, busy ones as they come back) and the next call searches again. */
  private giveUp(host: HostPool, err: unknown): void {
    if (host.givenUp) return;
    host.givenUp = true;
    if (this.current === host) this.current = null;
    // Before any connection ever worked this is the opening failing: its error says so, on one line.
    if (this.reached) this.warn(STORE_WARNINGS.serverGivenUp, err);
    void host.pool.end().catch(() => undefined);
  }

  private watched<T>(url: string, client: pg.ClientBase, pending: Promise<T>): Promise<T> {
    // end() with a statement in flight destroys the socket: the statement fails as a lost connection.
    return this.watch.watch(url, pending, () => void (client as pg.Client).end().catch(() => undefined));
  }
}

function send<R extends pg.QueryResultRow>(
  client: pg.ClientBase,
  query: QueryText,
  values?: unknown[],
): Promise<pg.QueryResult<R>> {
  return typeof query === 'string' ? client.query<R>(query, values) : client.query<R>(query);
}

/** Refuses a server the URL's target_session_attrs does not accept: for read-write, one in recovery or read-only. */
async function checkTarget(client: pg.ClientBase, target: PostgresTarget): Promise<void> {
  if (target.targetSessionAttrs === 'any') return;
  const { rows } = await client.query<{ recovery: boolean; read_only: string }>(
    "SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS read_only",
  );
  if (rows[0]!.recovery) throw new NotPrimaryError('the server is a standby (in recovery)');
  if (rows[0]!.read_only === 'on')
    throw new NotPrimaryError('the server is read-only (transaction_read_only)');
}

/** Whether this host is what the URL asks for, on a throw-away connection. */
async function probe(url: string, config: pg.ClientConfig, target: PostgresTarget): Promise<void> {
  const client = await connectChecked(url, config, target);
  void client.end().catch(() => undefined);
}

/** A client connected to this host and checked against the URL's target_session_attrs, within PROBE_TIMEOUT_MS. */
async function connectChecked(
  url: string,
  config: pg.ClientConfig,
  target: PostgresTarget,
): Promise<pg.Client> {
  const client = quickClient(config, url, PROBE_TIMEOUT_MS);
  try {
    await client.connect();
    await checkTarget(client, target);
    return client;
  } catch (err) {
    void client.end().catch(() => undefined);
    throw err;
  }
}

/**
 * One client of its own on the URL's primary (every host asked at once, as the pool does),
 * for tools outside the store: the chaos run's load sampler. Its statements are not watched.
 */
export async function connectToPrimary(url: string): Promise<pg.Client> {
  const parsed = parsePostgresUrl(url);
  if (!parsed.ok) throw new Error(`Invalid PostgreSQL URL: ${parsed.why}`);
  const { target } = parsed;
  const attempts = target.hostUrls.map((u) => connectChecked(u, {}, target));
  try {
    const winner = await Promise.any(attempts);
    // The others that connected too are not needed.
    for (const attempt of attempts)
      attempt.then(
        (c) => c !== winner && void c.end().catch(() => undefined),
        () => undefined,
      );
    return winner;
  } catch (err) {
    throw new NotPrimaryError(
      `No host of ${target.hosts.map((h) => `${h.host}:${h.port}`).join(',')} is a writable primary`,
      { cause: err },
    );
  }
}

/** host:port of a single-host URL, for messages (never the user or password). */
function redactHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '?';
  }
}
