/**
 * Which failures of a running store are passing (a cut connection, none to be had, SQLite busy),
 * and what of an error may go into a log. Here in `lib`, below every layer, because the HTTP
 * error mapper, the background services and the storage layer all ask.
 */
/**
 * PostgreSQL SQLSTATEs of a connection that failed or was cut (class 08, the server shutting
 * down or restarting, no connection slots), SQLite's busy store, Node's network failures.
 */
const TRANSIENT_CODES = new Set(['57P01', '57P02', '57P03', '53300', 'SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_RECOVERY', 'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT']);

/** What node-postgres and its pool say, without a code, when a connection ends or none comes. */
const TRANSIENT_MESSAGES = [/^Connection terminated/, /^timeout exceeded when trying to connect/, /^Client has encountered a connection error and is not queryable/];

/**
 * The store did not answer this time, though it may the next: a connection the database closed
 * (a restart, a failover, an administrator), none to be had, or SQLite busy past its timeout.
 * A request that meets one is answered 503 `store_unavailable` with Retry-After, not 500: the
 * caller's request was fine and a retry is the right move (with its Idempotency-Key, a retried
 * fire cannot make a second run). Not for errors of the statement itself (a constraint, a bug).
 */
export function isTransientStoreError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (TRANSIENT_CODES.has(code) || code.startsWith('08'))) return true;
  return TRANSIENT_MESSAGES.some((pattern) => pattern.test(error.message));
}

/**
 * What may be logged of an error met while working on health data: its type and code (a
 * SQLSTATE, `SQLITE_BUSY`, `ECONNREFUSED`: enough to act on at 2 a.m.), and its words only when
 * the store did not answer (they name a host or a connection). Other messages stay out of the
 * log: a driver's may quote the value it choked on (`invalid input syntax for type uuid: "…"`),
 * a JSON parser's a piece of the body.
 */
export function loggableError(error: unknown): { type: string; code?: string; message?: string } {
  const type = error instanceof Error ? error.name : typeof error;
  const code = (error as { code?: unknown } | null)?.code;
  return {
    type,
    ...(typeof code === 'string' || typeof code === 'number' ? { code: String(code) } : {}),
    ...(isTransientStoreError(error) ? { message: (error as Error).message } : {}),
  };
}
