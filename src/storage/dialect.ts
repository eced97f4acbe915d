/**
 * Which store a Kysely handle talks to, for the few statements whose SQL must differ (casts,
 * arrays, JSON functions). Read from the handle itself, so callers need not carry it around.
 */
import { PostgresAdapter, sql, type Kysely, type RawBuilder } from 'kysely';
import type { Dialect } from './connect.js';

export function dialectOfDb(db: Pick<Kysely<unknown>, 'getExecutor'>): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}

/**
 * A column a statement only checks, never reads through an index: on SQLite `+column` (SQLite
 * takes no index for an expression), elsewhere the column itself. For statements whose right
 * index SQLite, which the service never gives statistics, would not choose on its own: a
 * search page's records by rowid, a key's runs by the key's index.
 */
export function checkedOnlyOnSqlite(db: Pick<Kysely<unknown>, 'getExecutor'>, column: string): RawBuilder<string> {
  return dialectOfDb(db) === 'sqlite' ? sql<string>`+${sql.ref(column)}` : sql.ref<string>(column);
}
