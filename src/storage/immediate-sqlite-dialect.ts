import { SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';
import { CompiledQuery } from 'kysely';

/**
 * Kysely's SQLite dialect with transactions that take the write lock when they begin
 * (`BEGIN IMMEDIATE` instead of `BEGIN`).
 *
 * Why: the serving connection is not the only one that writes: new runs are written by their own
 * thread (engine/run-creation/sqlite-writer-thread.ts). A deferred transaction that has read and
 * then writes after that thread committed fails at once with SQLITE_BUSY_SNAPSHOT (its snapshot
 * is stale); it cannot wait. An immediate one waits for the lock (busy_timeout) before it reads,
 * so it always writes on top of the latest commit.
 */
export class ImmediateSqliteDialect extends SqliteDialect {
  constructor(private readonly dialectConfig: SqliteDialectConfig) {
    super(dialectConfig);
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.dialectConfig);
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}
