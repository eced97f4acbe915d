import { Migrator, sql } from 'kysely';
import { openStore, type Store } from '../../src/storage/connect.js';
import { migrations } from '../../src/storage/migrations/index.js';
import { freshStore, type FreshStore, type StoreKind } from './stores.js';

/**
 * Fresh stores migrated up to a given migration, as the version before a later one left them:
 * for tests of what a migration does to the rows stored before it. `closeAll` (in `afterAll`)
 * closes and drops every store opened.
 */
export function storesAtMigration(kind: StoreKind) {
  const opened: { fresh: FreshStore; store: Store }[] = [];
  return {
    /** A new store with every migration up to and including `name`; `migrator` goes on from there. */
    async open(name: string): Promise<{ store: Store; migrator: Migrator }> {
      const fresh = await freshStore(kind);
      const store = openStore(fresh.databaseUrl, fresh.storeOptions);
      opened.push({ fresh, store });
      const schema = kind === 'postgres' ? (await sql<{ s: string }>`select current_schema() as s`.execute(store.db)).rows[0].s : undefined;
      const migrator = new Migrator({ db: store.db, provider: { getMigrations: async () => migrations }, migrationTableSchema: schema });
      const { error } = await migrator.migrateTo(name);
      if (error) throw error;
      return { store, migrator };
    },
    async closeAll(): Promise<void> {
      for (const { fresh, store } of opened.splice(0)) {
        await store.close();
        await fresh.dispose();
      }
    },
  };
}
