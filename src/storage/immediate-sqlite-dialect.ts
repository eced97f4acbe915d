import { SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';
import { CompiledQuery } from 'kysely';

/**
 * Kysely's SQLite dialect with transactions that take the write lock when they begin
 * (`BEGIN IMMEDIATE` instead of `BEGIN`).
 *
 * Why: the serving connection need not be the only one that writes the file: `carepath admin`
 * commands run in processes of their own, and a `carepath migrate` or a second process may too.
 * A deferred transaction that has read and then writes after another connection committed fails
 * at once with SQLITE_BUSY_SNAPSHOT (its snapshot is stale); it cannot wait. An immediate one waits for the lock (busy_timeout) before it reads,
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
