/**
 * Migrations apply all or nothing, on both stores: a migration that stops half way (a failure
 * here; a `kill -9` is the same, without even the rollback) leaves no table, column or record of
 * itself, and the next start applies it whole. On SQLite Kysely ran each statement on its own,
 * and a `carepath migrate` killed in the middle left a store that no start could open again
 * ("duplicate column name").
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Migrator, sql, type Kysely, type Migration } from 'kysely';
import { openStore, type Store } from '../../src/storage/connect.js';
import { freshStore, STORE_KINDS, type FreshStore } from '../helpers/stores.js';

/** Tables of the store's schema (the current schema on PostgreSQL), by name. */
async function tableNames(store: Store): Promise<string[]> {
  const rows =
    store.dialect === 'sqlite'
      ? await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(store.db)
      : await sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = current_schema()`.execute(store.db);
  return rows.rows.map((row) => row.name).sort();
}

for (const kind of STORE_KINDS) {
  describe(`migrations [${kind}]`, () => {
    const opened: { fresh: FreshStore; store: Store }[] = [];
    afterAll(async () => {
      for (const { fresh, store } of opened) {
        await store.close();
        await fresh.dispose();
      }
    });

    it('a migration that stops half way leaves nothing of itself, and the next run applies it whole', async () => {
      const fresh = await freshStore(kind);
      const store = openStore(fresh.databaseUrl, fresh.storeOptions);
      opened.push({ fresh, store });
      let failMidway = true;
      const migrations: Record<string, Migration> = {
        '0001_first': {
          up: async (db: Kysely<unknown>) => {
            await db.schema.createTable('first_table').addColumn('id', 'text', (c) => c.primaryKey()).execute();
          },
        },
        '0002_second': {
          up: async (db: Kysely<unknown>) => {
            await db.schema.alterTable('first_table').addColumn('added', 'text').execute();
            await db.schema.createTable('second_table').addColumn('id', 'text').execute();
            if (failMidway) throw new Error('stopped half way');
          },
        },
      };
      const schema = kind === 'postgres' ? (await sql<{ s: string }>`select current_schema() as s`.execute(store.db)).rows[0].s : undefined;
      const migrator = () => new Migrator({ db: store.db, provider: { getMigrations: async () => migrations }, migrationTableSchema: schema });

      const failed = await migrator().migrateToLatest();
      expect(failed.error).toBeInstanceOf(Error);
      // Neither migration's tables, nor the column, nor a record of either.
      const left = await tableNames(store);
      expect(left).not.toContain('first_table');
      expect(left).not.toContain('second_table');
      expect(await sql<{ name: string }>`select name from kysely_migration`.execute(store.db).then((r) => r.rows)).toEqual([]);

      failMidway = false;
      const applied = await migrator().migrateToLatest();
      expect(applied.error).toBeUndefined();
      expect(applied.results?.map((r) => [r.migrationName, r.status])).toEqual([
        ['0001_first', 'Success'],
        ['0002_second', 'Success'],
      ]);
      await sql`insert into first_table (id, added) values ('a', 'b')`.execute(store.db);
      expect(await tableNames(store)).toEqual(expect.arrayContaining(['first_table', 'second_table']));
    });
  });
}
