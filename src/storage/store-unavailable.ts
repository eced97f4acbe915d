/**
 * The store named by CAREPATH_DATABASE_URL cannot be opened, said as a sentence an operator can
 * act on at 2 a.m.: which store (the password never shown), what went wrong, the driver's code
 * and words.
 * Only failures of reaching or opening the store are translated; anything else (a failing
 * migration, a bug) keeps its own message.
 */
export class StoreUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreUnavailableError';
  }
}

/** By the error's `code`: Node's network errors, PostgreSQL's SQLSTATEs, SQLite's result codes. */
const WHAT_WENT_WRONG: Record<string, string> = {
  ECONNREFUSED: 'nothing listens there; is PostgreSQL running, on that host and port?',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name did not resolve (no answer from DNS)',
  ETIMEDOUT: 'the connection timed out; a firewall, or the wrong host?',
  EHOSTUNREACH: 'the host cannot be reached',
  '28P01': 'PostgreSQL refused the user name or password',
  '28000': 'PostgreSQL does not accept this user (no such role, or pg_hba.conf refuses it from here)',
  '3D000': 'the database does not exist; create it first (createdb)',
  '53300': 'PostgreSQL has no connection slots left',
  '57P03': 'PostgreSQL is starting up or shutting down; try again shortly',
  SQLITE_NOTADB: 'the file is not a SQLite database',
  SQLITE_CANTOPEN: 'the file cannot be opened (a directory, or no permission?)',
  SQLITE_READONLY: 'the file is read-only for this user',
  SQLITE_CORRUPT: 'the database file is damaged; restore it from a backup (docs/operations.md)',
};

export function storeUnavailable(databaseUrl: string, error: unknown): StoreUnavailableError | null {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !Object.hasOwn(WHAT_WENT_WRONG, code)) return null;
  // The driver's own words go along: at this stage they name a host, a role or a file, never data.
  const said = error instanceof Error && error.message ? `: ${error.message}` : '';
  return new StoreUnavailableError(
    `cannot open the store in CAREPATH_DATABASE_URL (${withoutPassword(databaseUrl)}): ${WHAT_WENT_WRONG[code]} [${code}${said}]`,
  );
}

/** The URL as it may be printed: a PostgreSQL password (in the user part or a parameter) replaced by `***`. */
export function withoutPassword(databaseUrl: string): string {
  if (!/^postgres(ql)?:/.test(databaseUrl)) return databaseUrl;
  try {
    const url = new URL(databaseUrl);
    if (url.password) url.password = '***';
    // libpq-style URLs may carry it as a parameter too.
    for (const name of [...url.searchParams.keys()]) if (name.toLowerCase() === 'password') url.searchParams.set(name, '***');
    return url.toString();
  } catch {
    return 'postgres://… (not a valid URL)';
  }
}

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
