import BetterSqlite3 from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import pg from 'pg';
import type { Database, Db } from './database.js';
import { withStatementCache } from './sqlite-statement-cache.js';

export type Dialect = 'sqlite' | 'postgres';

export interface Store {
  db: Db;
  dialect: Dialect;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** PostgreSQL only: the schema to use (tests give each file its own). */
  schema?: string;
  /** PostgreSQL only: connections in the pool. */
  poolSize?: number;
}

// COUNT(*) and BIGINT come back from pg as strings (they may exceed 2^53). Every bigint this
// service stores (counts, milliseconds) fits in a double, so read them as numbers.
pg.types.setTypeParser(20, (text) => Number(text));

export function dialectOf(databaseUrl: string): Dialect {
  return databaseUrl.startsWith('sqlite:') ? 'sqlite' : 'postgres';
}

export function openStore(databaseUrl: string, options: StoreOptions = {}): Store {
  return dialectOf(databaseUrl) === 'sqlite'
    ? openSqlite(databaseUrl.slice('sqlite:'.length))
    : openPostgres(databaseUrl, options);
}

function openSqlite(path: string): Store {
  const file = path === ':memory:' || path === '' ? ':memory:' : path;
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const connection = new BetterSqlite3(file);
  // WAL lets readers go on while one writer commits; synchronous=NORMAL in WAL mode keeps the
  // database consistent on power loss and fsyncs at checkpoints (docs/decisions.md).
  connection.pragma('journal_mode = WAL');
  connection.pragma('synchronous = NORMAL');
  connection.pragma('busy_timeout = 5000');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(connection) }) });
  return { db, dialect: 'sqlite', close: () => db.destroy() };
}

function openPostgres(databaseUrl: string, options: StoreOptions): Store {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.poolSize ?? 20,
    options: options.schema ? `-c search_path=${options.schema}` : undefined,
  });
  // An idle client that loses its server must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', close: () => db.destroy() };
}
