/**
 * What a failed PostgreSQL call says about its connection and its server, which decides
 * what the driver does next: run the transaction again, settle its COMMIT by its marker,
 * drop the connection, look for the primary again, or give up.
 *
 *   connection error  the connection broke (socket error, server shutdown 57P…, 08…, a
 *                     session the server ended, a connection dropped as stuck): whatever
 *                     was in flight is rolled back, except a COMMIT already sent, whose
 *                     outcome is unknown
 *   not primary       the server is not a writable primary (25006 read_only_sql_transaction
 *                     after a demotion, a standby found when connecting, no host writable
 *                     yet during a failover): refused, nothing was written
 *   retryable         either of those, a serialization failure (40001) or a deadlock (40P01)
 */

/** The server is (no longer) a writable primary, or no host of the URL is one right now. */
export class NotPrimaryError extends Error {
  readonly code = 'BERTH_NOT_PRIMARY';
}

const ABSENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', '3D000']);

/** A connection was asked of a server's pool just as another call gave that server up. */
export class ServerGivenUpError extends Error {
  readonly code = 'BERTH_SERVER_GIVEN_UP';
}

const CONNECTION_CODES = new Set([
  'BERTH_SERVER_GIVEN_UP',
  '25P03', // idle_in_transaction_session_timeout: the server ended the session (rolled back)
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
]);

export function isConnectionError(err: unknown): boolean {
  const code = codeOf(err);
  if (CONNECTION_CODES.has(code) || code.startsWith('08') || code.startsWith('57P')) return true;
  // node-postgres reports a dropped socket or a connect timeout without a code.
  return (
    err instanceof Error &&
    /Connection terminated|connection error|timeout exceeded when trying to connect|Client was closed|Query read timeout/i.test(
      err.message,
    )
  );
}

export function isNotPrimary(err: unknown): boolean {
  return err instanceof NotPrimaryError || codeOf(err) === '25006';
}

/** Only this session ended (the server timed out its idle transaction): the server itself is fine. */
export function endedSessionOnly(err: unknown): boolean {
  return codeOf(err) === '25P03';
}

/**
 * Nobody there, or not for us: no server listens (refused, unknown host, no route), the
 * credentials are refused (28…) or the database does not exist (3D000). At open these
 * fail at once; a later call retries them like any lost connection (a restart refuses
 * connections for a while).
 */
export function isAbsent(err: unknown, depth = 0): boolean {
  // Several hosts: absent only if every one is.
  if (err instanceof AggregateError)
    return err.errors.length > 0 && err.errors.every((e) => isAbsent(e, depth + 1));
  const code = codeOf(err);
  if (ABSENT_CODES.has(code) || /^28[0-9A-Z]{3}$/.test(code)) return true;
  const cause = (err as { cause?: unknown })?.cause;
  return depth < 4 && cause !== undefined && isAbsent(cause, depth + 1);
}

export function isRetryable(err: unknown): boolean {
  const code = codeOf(err);
  return code === '40001' || code === '40P01' || isConnectionError(err) || isNotPrimary(err);
}

function codeOf(err: unknown): string {
  return String((err as { code?: unknown })?.code ?? '');
}
