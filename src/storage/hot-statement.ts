/**
 * Statements run on nearly every request or batch (the API key's lookup, a fire's trigger, a
 * delivery's endpoint, a delivery group's event triggers and waiting subjects, the engine's
 * claim), written once as SQL text per store and run prepared, without Kysely's query builder:
 * on SQLite prepared once per connection and run while Kysely's lock on the one connection is
 * held (`sqliteRunnerOf`); on PostgreSQL as a named, server-side prepared statement
 * (postgres-statement.ts). Inside a transaction the text runs through Kysely on the
 * transaction's connection, which still prepares it under its name (postgres-statement-names.ts).
 *
 * Why: for a lookup of one or a few rows by key, building and compiling the query took more of
 * the serving thread than the store's own work (fire on SQLite: the key and trigger lookups
 * through Kysely were about 7% of the serving thread, --cpu-prof, docs/benchmarks.md 2026-11-26).
 *
 * Texts are statements that return rows (`all`): lookups, and the engine's claim (an UPDATE …
 * RETURNING). Inside a transaction the text still skips the builder, and on SQLite Kysely's
 * driver keeps it prepared (sqlite-statement-cache.ts). A list travels as one parameter: JSON
 * text read with `json_each` on SQLite, an array (`= any($n::text[])`) on PostgreSQL; `params`
 * makes the parameters for the store at hand.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery } from 'kysely';
import type { DbOrTx } from './database.js';
import { sqliteRunnerOf, type Dialect } from './connect.js';
import { dialectOfDb } from './dialect.js';
import { runPostgres } from './postgres-statement.js';
import { weakMemo } from '../lib/weak-memo.js';

export interface HotStatement {
  /** the PostgreSQL statement name; unique per text, versioned (`carepath_<what>_v1`) */
  name: string;
  /** SQLite text, `?` placeholders */
  sqlite: string;
  /** PostgreSQL text, `$n` placeholders */
  postgres: string;
}

const preparedOf = weakMemo(() => new Map<HotStatement, BetterSqlite3.Statement>());

export async function runHot<R>(db: DbOrTx, statement: HotStatement, params: (dialect: Dialect) => unknown[]): Promise<R[]> {
  const dialect = dialectOfDb(db);
  if (dialect === 'postgres') return (await runPostgres(db, { name: statement.name, text: statement.postgres }, params(dialect))) as R[];
  const run = sqliteRunnerOf(db);
  if (run) {
    return run((connection) => {
      const statements = preparedOf(connection);
      let prepared = statements.get(statement);
      if (!prepared) {
        prepared = connection.prepare(statement.sqlite);
        statements.set(statement, prepared);
      }
      return prepared.all(...params(dialect)) as R[];
    });
  }
  return (await db.executeQuery<R>(CompiledQuery.raw(statement.sqlite, params(dialect)))).rows;
}

/** A list as one parameter: JSON text for SQLite's `json_each`, an array for PostgreSQL. */
export function listParameter(dialect: Dialect, values: readonly string[]): unknown {
  return dialect === 'postgres' ? values : JSON.stringify(values);
}
