/**
 * Tells a stuck connection from a slow statement, and drops the stuck one. A server whose
 * machine vanished or whose link was cut sends nothing, not even a reset, so a statement
 * on it would wait for TCP to give up (hours). A statement may also legitimately wait: for
 * a row lock, or a COMMIT for the synchronous standby. So no timeout ends a statement;
 * instead, while one has had no answer for QUIET_MS, the watch asks the same server for a
 * new connection and `SELECT 1`, every QUIET_MS: if the server answers (an error of its own,
 * such as too many connections, is an answer too), the statement is waiting and goes on; if it does not within CHECK_TIMEOUT_MS, the statement's connection
 * is dropped (its socket destroyed) and the statement fails as a lost connection.
 *
 * Never a cancel: a cancelled COMMIT that waits for the synchronous standby succeeds
 * locally with only a WARNING, and is lost at the next failover. Dropping the connection
 * leaves that COMMIT to finish or fail on the server; the commit marker settles which.
 *
 * Invariants: at most one check per server in flight, shared by every statement waiting
 * on it; a statement that settled is never dropped afterwards; timers never keep the
 * process alive.
 */
import pg from 'pg';

/** A statement silent this long makes the watch check its server. */
const QUIET_MS = 1000;
/** A server that does not accept a connection and answer `SELECT 1` within this is gone. */
const CHECK_TIMEOUT_MS = 2000;

export class ServerWatch {
  private readonly checks = new Map<string, Promise<boolean>>();

  constructor(
    /** Settings of the check connections (types, application name); each check names its server. */
    private readonly config: pg.ClientConfig,
    /** Told of each connection dropped, with the server it was on. */
    private readonly onDrop: (url: string) => void,
  ) {}

  /** `pending`, while the server at `url` answers; otherwise `drop()` is called, which must end the connection (`pending` then fails). */
  watch<T>(url: string, pending: Promise<T>, drop: () => void): Promise<T> {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const check = async () => {
      const answers = await this.answers(url);
      if (settled) return;
      if (answers) {
        timer = setTimeout(check, QUIET_MS);
        timer.unref();
        return;
      }
      this.onDrop(url);
      drop();
    };
    timer = setTimeout(check, QUIET_MS);
    timer.unref();
    return pending.finally(() => {
      settled = true;
      clearTimeout(timer);
    });
  }

  /** Whether the server accepts a new connection and answers, within CHECK_TIMEOUT_MS. */
  private answers(url: string): Promise<boolean> {
    let check = this.checks.get(url);
    if (!check) {
      check = answersOnce(this.config, url).finally(() => this.checks.delete(url));
      this.checks.set(url, check);
    }
    return check;
  }
}

/**
 * A client for one quick question to one server: connecting and each query bounded by
 * `timeoutMs` (pg's own query timeout: the client is thrown away after, so a timed-out
 * query cannot confuse a later one), errors of an idle moment ignored. Not yet connected.
 */
export function quickClient(config: pg.ClientConfig, url: string, timeoutMs: number): pg.Client {
  const client = new pg.Client({
    ...config,
    connectionString: url,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  client.on('error', () => undefined);
  return client;
}

async function answersOnce(config: pg.ClientConfig, url: string): Promise<boolean> {
  const client = quickClient(config, url, CHECK_TIMEOUT_MS);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch (err) {
    // An error from the server itself (too many connections, starting up) is an answer too.
    return (
      typeof (err as { code?: unknown }).code === 'string' &&
      /^[0-9A-Z]{5}$/.test((err as { code: string }).code)
    );
  } finally {
    void client.end().catch(() => undefined);
  }
}
