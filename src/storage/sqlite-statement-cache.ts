import type BetterSqlite3 from 'better-sqlite3';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

/**
 * Kysely's SQLite driver prepares every statement it runs. Preparing is a large part of a
 * short query's cost (about a quarter of the CPU of a fired trigger, measured with --cpu-prof),
 * so the database handed to Kysely keeps the most recently used statements. Safe because the
 * driver runs one statement at a time on the single connection.
 */
export function withStatementCache(database: BetterSqlite3.Database, capacity = 500): SqliteDatabase {
  const statements = new Map<string, SqliteStatement>();
  return {
    close: () => {
      statements.clear();
      database.close();
    },
    prepare(sql: string): SqliteStatement {
      const cached = statements.get(sql);
      if (cached) {
        // Move to the back: the Map's insertion order is the recency order.
        statements.delete(sql);
        statements.set(sql, cached);
        return cached;
      }
      const statement = database.prepare(sql) as unknown as SqliteStatement;
      statements.set(sql, statement);
      if (statements.size > capacity) statements.delete(statements.keys().next().value as string);
      return statement;
    },
  };
}
