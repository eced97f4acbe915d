/**
 * PostgreSQL statements written once as SQL text (`$1…$n`) and run on the pool directly, without
 * Kysely building and compiling a query per call. For the few statements every API request runs
 * (the key lookup, a search's bitmap read and page), where that work and PostgreSQL parsing the
 * text were a measurable share of a request of a few milliseconds.
 *
 * A statement with a `name` runs as a named, server-side prepared statement: each pooled
 * connection parses it once. PostgreSQL may then switch it to a generic plan (planned once, for
 * any parameters) after five runs, when that plan is estimated no dearer than the custom ones;
 * name only statements whose generic plan cannot be much worse than their custom plans, even
 * when made while a table was empty. Without a name, a statement is planned afresh on every run.
 *
 * A transaction handle has no way to the pool's connections: there the text runs on the
 * transaction's connection through Kysely, and that connection still prepares it under its name
 * (the name is registered by text, postgres-statement-names.ts, and looked up in connect.ts).
 */
import { CompiledQuery } from 'kysely';
import type { QueryResultRow } from 'pg';
import type { Db, DbOrTx } from './database.js';
import { postgresPoolOf } from './connect.js';
import { registerStatementName } from './postgres-statement-names.js';

export interface PostgresStatement {
  /** unique per text: a pooled connection refuses a name it knows with another text */
  name?: string;
  text: string;
}

/** Runs `statement` on a PostgreSQL store (never SQLite: the text is PostgreSQL's). */
export async function runPostgres<R extends QueryResultRow>(db: DbOrTx, statement: PostgresStatement, values: unknown[]): Promise<R[]> {
  const pool = db.isTransaction ? undefined : postgresPoolOf(db as Db);
  if (statement.name) registerStatementName(statement.name, statement.text);
  if (!pool) return (await db.executeQuery<R>(CompiledQuery.raw(statement.text, values))).rows;
  const { name, text } = statement;
  return (await pool.query<R>(name ? { name, text, values } : { text, values })).rows;
}
