import { SqliteAdapter, SqliteDialect, SqliteDriver, type DatabaseConnection, type DialectAdapter, type Driver, type SqliteDialectConfig } from 'kysely';
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

  override createAdapter(): DialectAdapter {
    return new TransactionalDdlSqliteAdapter();
  }
}

/**
 * SQLite's DDL is transactional, though Kysely's adapter says otherwise: its migrator then ran
 * each migration's statements one by one, outside any transaction, and a process killed in the
 * middle (a `kill -9` during `carepath migrate`) left a migration half applied and unrecorded,
 * which every later start tried again and failed on ("duplicate column name"), for good (a
 * durability review). Said true, the migrator applies the pending migrations and records them in
 * one transaction: all of them or none. Begun IMMEDIATE (below), it also holds the write lock
 * from before it reads which migrations are applied, so two processes migrating one file at once
 * apply each migration once (Kysely's migration lock on SQLite does nothing).
 */
class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }

  /**
   * SQLite rolls a transaction back by itself when its COMMIT (or a statement) fails for want of
   * room, memory or I/O; Kysely's ROLLBACK after it then fails with "cannot rollback - no
   * transaction is active", and that error took the place of the real one: a full disk came out
   * as SQLITE_ERROR, a delivery used up its attempts instead of waiting for room, a request
   * answered 500 instead of 503 (a review of failed deliveries). Nothing left to roll back is
   * not an error.
   */
  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    try {
      await connection.executeQuery(CompiledQuery.raw('rollback'));
    } catch (error) {
      if (error instanceof Error && /no transaction is active/.test(error.message)) return;
      throw error;
    }
  }
}
