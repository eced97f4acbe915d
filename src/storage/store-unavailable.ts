/**
 * The store named by CAREPATH_DATABASE_URL cannot be opened, said as a sentence an operator can
 * act on at 2 a.m.: which store (the password never shown), what went wrong, the driver's code
 * and words.
 * Only failures of reaching or opening the store are translated; anything else (a failing
 * migration, a bug) keeps its own message.
 */
import { POSTGRES_CONNECTION_DEFAULTS } from './postgres-defaults.js';

export class StoreUnavailableError extends Error {
  /**
   * @param mayPass the store may just not be up yet (nothing listens, starting up, no answer,
   *   no slots): worth waiting for at start (cli/wait-for-store.ts). Not for a wrong password,
   *   a database that does not exist or a damaged file: waiting would not help.
   */
  constructor(
    message: string,
    readonly mayPass = false,
  ) {
    super(message);
    this.name = 'StoreUnavailableError';
  }
}

/** Codes of a PostgreSQL server that is not (yet) up or reachable, rather than one that refuses. */
const MAY_PASS = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'EAI_AGAIN', 'ECONNRESET', '53300', '57P03']);

const PATH_THROUGH_A_FILE = 'a part of the path to the SQLite file is a file, not a folder; choose another path';

/** By the error's `code`: Node's network errors, PostgreSQL's SQLSTATEs, SQLite's result codes. */
const WHAT_WENT_WRONG: Record<string, string> = {
  ECONNREFUSED: 'nothing listens there; is PostgreSQL running, on that host and port?',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name did not resolve (no answer from DNS)',
  ETIMEDOUT: 'the connection timed out; a firewall, or the wrong host?',
  EHOSTUNREACH: 'the host cannot be reached',
  ECONNRESET: 'the connection was reset before PostgreSQL answered; is it PostgreSQL on that port, or does a firewall or proxy cut it?',
  '28P01': 'PostgreSQL refused the user name or password',
  '28000': 'PostgreSQL does not accept this user (no such role, or pg_hba.conf refuses it from here)',
  '3D000': 'the database does not exist; create it first (createdb)',
  '53300': 'PostgreSQL has no connection slots left',
  '57P03': 'PostgreSQL is starting up or shutting down; try again shortly',
  SQLITE_NOTADB: 'the file is not a SQLite database',
  SQLITE_CANTOPEN: 'the file cannot be opened (a directory, or no permission?)',
  SQLITE_READONLY: 'the file is read-only for this user',
  // From the writability check before a SQLite file is opened (migrate.ts).
  EACCES: 'this user may not write the SQLite file or its folder (where the WAL goes); check their owner and permissions',
  EPERM: 'the SQLite file or its folder may not be written, even by root: is it immutable (lsattr; chattr -i)?',
  EROFS: 'the SQLite file is on a read-only file system; mount it writable or choose another path',
  // From making the SQLite file's folder.
  EEXIST: PATH_THROUGH_A_FILE,
  ENOTDIR: PATH_THROUGH_A_FILE,
  SQLITE_CORRUPT: 'the database file is damaged; restore it from a backup (docs/operations.md)',
};

/** What node-postgres says without a code when a connection never got going. */
const WHAT_WENT_WRONG_UNCODED: [RegExp, string][] = [
  [
    /^Connection terminated unexpectedly$/,
    'the connection was closed before PostgreSQL answered; is it PostgreSQL on that port, and does a firewall or proxy cut it (or does the server want TLS: ?sslmode=require)?',
  ],
  [
    /^(timeout exceeded when trying to connect|Connection terminated due to connection timeout)$/,
    `no answer within ${POSTGRES_CONNECTION_DEFAULTS.connectionTimeoutMillis / 1000} s; a firewall dropping packets, or the wrong host?`,
  ],
];

export function storeUnavailable(databaseUrl: string, error: unknown): StoreUnavailableError | null {
  const code = (error as { code?: unknown } | null)?.code;
  // The driver's own words go along: at this stage they name a host, a role or a file, never data.
  const words = error instanceof Error ? error.message : '';
  const where = `cannot open the store in CAREPATH_DATABASE_URL (${withoutPassword(databaseUrl)})`;
  if (typeof code === 'string' && Object.hasOwn(WHAT_WENT_WRONG, code)) {
    return new StoreUnavailableError(`${where}: ${WHAT_WENT_WRONG[code]} [${code}${words ? `: ${words}` : ''}]`, MAY_PASS.has(code));
  }
  const uncoded = code === undefined ? WHAT_WENT_WRONG_UNCODED.find(([pattern]) => pattern.test(words)) : undefined;
  return uncoded ? new StoreUnavailableError(`${where}: ${uncoded[1]} [${words}]`, true) : null;
}

/**
 * The URL as it may be printed: a PostgreSQL password (in the user part or a parameter) replaced
 * by `***`. The user part is cut as text first, up to the last `@`: a password written with a
 * `#`, `/` or `?` unencoded ends the URL's authority early for a URL parser, which then showed the
 * rest of it as a path or fragment (`u:***@ss#word@host`, an operations review).
 */
export function withoutPassword(databaseUrl: string): string {
  const scheme = /^postgres(?:ql)?:\/\//.exec(databaseUrl)?.[0];
  if (!/^postgres(ql)?:/.test(databaseUrl)) return databaseUrl;
  let masked = databaseUrl;
  if (scheme) {
    const rest = databaseUrl.slice(scheme.length);
    const at = rest.lastIndexOf('@');
    const colon = rest.indexOf(':');
    if (at >= 0 && colon >= 0 && colon < at) masked = `${scheme}${rest.slice(0, colon)}:***${rest.slice(at)}`;
  }
  try {
    const url = new URL(masked);
    if (url.password) url.password = '***';
    // libpq-style URLs may carry it as a parameter too.
    for (const name of [...url.searchParams.keys()]) if (name.toLowerCase() === 'password') url.searchParams.set(name, '***');
    return url.toString();
  } catch {
    return 'postgres://… (not a valid URL)';
  }
}
