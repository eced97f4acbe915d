import BetterSqlite3 from 'better-sqlite3';
import { Kysely } from 'kysely';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import pg from 'pg';
import type { Database, Db, DbOrTx } from './database.js';
import { withStatementCache } from './sqlite-statement-cache.js';
import { SchemaScopedPostgresDialect } from './schema-scoped-dialect.js';
import { FALLBACK_AUTOCHECKPOINT_PAGES, startCheckpointer } from './sqlite-checkpointer.js';
import { SqliteWalSync } from './sqlite-wal-sync.js';
import { ImmediateSqliteDialect } from './immediate-sqlite-dialect.js';
import { POSTGRES_CONNECTION_DEFAULTS, POSTGRES_QUERY_TIMEOUT_MS } from './postgres-defaults.js';
import { foldCase, SQLITE_FOLD_CASE } from '../lib/like.js';
import { statementNameOf } from './postgres-statement-names.js';

export type Dialect = 'sqlite' | 'postgres';

export interface Store {
  db: Db;
  dialect: Dialect;
  close(): Promise<void>;
  /**
   * Resolves once every transaction committed so far survives a power cut: on a SQLite file, a
   * flush of its WAL (sqlite-wal-sync.ts). Absent where a commit is durable when it returns
   * (PostgreSQL with synchronous_commit) or cannot be (an in-memory store).
   */
  syncCommits?: () => Promise<void>;
}

export interface StoreOptions {
  /** PostgreSQL only: the schema to use (tests give each file its own). */
  schema?: string;
  /** PostgreSQL only: connections in the pool. */
  poolSize?: number;
  /**
   * PostgreSQL only: how long a query waits for a connection (a new one, or a busy pool's next
   * free one) before it fails as a passing store error (a request then answers 503
   * `store_unavailable`). Default: POSTGRES_CONNECTION_DEFAULTS.
   */
  connectTimeoutMs?: number;
  /**
   * PostgreSQL only: how long a statement may run before the server ends it (a passing store
   * error); a query with no answer at all a little after that fails too, and its connection is
   * closed. 0 for no limit (migrations). Default: POSTGRES_QUERY_TIMEOUT_MS.
   */
  queryTimeoutMs?: number;
}

// COUNT(*) and BIGINT come back from pg as strings (they may exceed 2^53). Every bigint this
// service stores (counts, milliseconds) fits in a double, so read them as numbers.
pg.types.setTypeParser(20, (text) => Number(text));

/**
 * The driver objects behind a store's Kysely handle, for the few hot statements that are written
 * once as SQL and run without the query builder (the fire path's run creation,
 * engine/run-creation/). Kysely stays the way everything else talks to the store.
 */
const sqliteConnections = new WeakMap<Db, BetterSqlite3.Database>();
const postgresPools = new WeakMap<Db, pg.Pool>();

/**
 * The SQLite connection of `db`. Use it only inside `db.connection().execute(…)` (which holds
 * Kysely's lock on the single connection) and synchronously, so no Kysely transaction of
 * another caller can be open around the statements.
 */
export function sqliteConnectionOf(db: Db): BetterSqlite3.Database | undefined {
  return sqliteConnections.get(db);
}

/** Synchronous work on a SQLite connection, run under Kysely's lock on it. */
export type SqliteRunner = <T>(work: (connection: BetterSqlite3.Database) => T) => Promise<T>;

/**
 * Runs synchronous work on `db`'s SQLite connection inside `db.connection().execute(…)`, so no
 * other caller's transaction is open around its statements; undefined on PostgreSQL, and inside a
 * transaction, whose statements must run on that transaction's own turn (through Kysely).
 */
export function sqliteRunnerOf(db: DbOrTx): SqliteRunner | undefined {
  if (db.isTransaction) return undefined;
  const connection = sqliteConnections.get(db as Db);
  if (!connection) return undefined;
  return (work) => (db as Db).connection().execute(async () => work(connection));
}

/** The PostgreSQL pool of `db` (for named, server-side prepared statements). */
export function postgresPoolOf(db: Db): pg.Pool | undefined {
  return postgresPools.get(db);
}

export function dialectOf(databaseUrl: string): Dialect {
  return databaseUrl.startsWith('sqlite:') ? 'sqlite' : 'postgres';
}

/**
 * The SQLite database file a URL names, its folder made if missing; null for PostgreSQL and for
 * an in-memory store (`sqlite::memory:`; an empty `sqlite:` also opens one here, but the
 * configuration refuses it: config.ts).
 */
export function sqliteFileOf(databaseUrl: string): string | null {
  const path = sqlitePathOf(databaseUrl);
  if (path !== null) mkdirSync(dirname(path), { recursive: true });
  return path;
}

/** The SQLite database file a URL names, as written, touching nothing; null as for `sqliteFileOf`. */
export function sqlitePathOf(databaseUrl: string): string | null {
  if (dialectOf(databaseUrl) !== 'sqlite') return null;
  const path = databaseUrl.slice('sqlite:'.length);
  return path === '' || path === ':memory:' ? null : path;
}

export function openStore(databaseUrl: string, options: StoreOptions = {}): Store {
  return dialectOf(databaseUrl) === 'sqlite' ? openSqlite(sqliteFileOf(databaseUrl) ?? ':memory:') : openPostgres(databaseUrl, options);
}

function openSqlite(file: string): Store {
  const connection = new BetterSqlite3(file);
  // WAL lets readers go on while one writer commits; synchronous=NORMAL in WAL mode keeps the
  // database consistent on power loss and fsyncs at checkpoints (docs/decisions.md); an answer
  // that says something is stored waits for `syncCommits` (sqlite-wal-sync.ts). Statement
  // journals (an INSERT whose triggers write other tables opens one) stay in memory.
  connection.pragma('journal_mode = WAL');
  connection.pragma('synchronous = NORMAL');
  connection.pragma('busy_timeout = 5000');
  connection.pragma('temp_store = memory');
  // SQLite's lower() lowers ASCII letters only: a name search for "Émile" found nothing
  // (lib/like.ts). This one folds every letter Unicode has a lower case for.
  connection.function(SQLITE_FOLD_CASE, { deterministic: true }, (value: unknown) => (typeof value === 'string' ? foldCase(value) : value) as string);
  const db = new Kysely<Database>({ dialect: new ImmediateSqliteDialect({ database: withStatementCache(connection) }) });
  sqliteConnections.set(db, connection);
  if (file === ':memory:') return { db, dialect: 'sqlite', close: () => db.destroy() };
  // Checkpoints run on their own thread (sqlite-checkpointer.ts), which asks this connection for
  // a moment's quiet when the WAL should start over; this connection checkpoints only if the WAL
  // grows well past that, should the thread fall behind.
  connection.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
  const checkpointer = startCheckpointer(file, (quiet) => db.connection().execute(quiet));
  const walSync = new SqliteWalSync(`${file}-wal`);
  return {
    db,
    dialect: 'sqlite',
    syncCommits: () => walSync.sync(),
    close: async () => {
      // What this process committed is on disk before it goes (an admin command's new key).
      try {
        await walSync.close();
      } finally {
        await checkpointer.stop();
        await db.destroy();
      }
    },
  };
}

/**
 * Every query a pooled connection is given passes here:
 * - text registered with a statement name (postgres-statement-names.ts) runs as that named,
 *   prepared statement, also when Kysely hands it over bare inside a transaction;
 * - node-postgres fails a query that outlives `query_timeout` but keeps its connection, still
 *   waiting for the answer: handed back to the pool, it would hold every query given to it after.
 *   Such a connection is closed instead (`end` destroys one with a query in flight), and the pool
 *   drops it when it comes back.
 */
function wrapClientQuery(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const name = typeof args[0] === 'string' && Array.isArray(args[1]) && args.length === 2 ? statementNameOf(args[0]) : undefined;
    const answer = name ? query({ name, text: args[0], values: args[1] }) : query(...args);
    if (answer instanceof Promise) {
      answer.catch((error: unknown) => {
        if (error instanceof Error && error.message === 'Query read timeout') client.end().catch(() => undefined);
      });
    }
    return answer;
  };
}

function openPostgres(databaseUrl: string, options: StoreOptions): Store {
  const queryTimeoutMs = options.queryTimeoutMs ?? POSTGRES_QUERY_TIMEOUT_MS;
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.poolSize ?? 20,
    // A query that gets no connection in time fails as a passing store error: a caller is better
    // served by a 503 it can retry than by a request that hangs.
    ...POSTGRES_CONNECTION_DEFAULTS,
    connectionTimeoutMillis: options.connectTimeoutMs ?? POSTGRES_CONNECTION_DEFAULTS.connectionTimeoutMillis,
    // The server ends a statement that runs too long (a lock waited for, a slow plan), and its
    // transaction with it; the client gives up a little later, should no answer come at all (a
    // database gone silent), and closes that connection (wrapClientQuery).
    ...(queryTimeoutMs > 0 ? { statement_timeout: queryTimeoutMs, query_timeout: queryTimeoutMs + Math.min(10_000, queryTimeoutMs) } : {}),
    options: options.schema ? `-c search_path=${options.schema}` : undefined,
  });
  // An idle client that loses its server must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  // Nor a checked-out one: node-postgres emits the loss of a connection as an 'error' event on
  // the client even while a query or a transaction holds it, and the pool listens only while it
  // is idle. Unheard, that event ended the process (a worker whose connection the database
  // terminated between a query's failure and its release). The holder sees the failure anyway
  // (its query fails, or the next one: "not queryable"), and the pool drops the client on release.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
    wrapClientQuery(client);
  });
  const db = new Kysely<Database>({ dialect: new SchemaScopedPostgresDialect({ pool }) });
  postgresPools.set(db, pool);
  return { db, dialect: 'postgres', close: () => db.destroy() };
}
