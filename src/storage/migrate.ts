import { Migrator, sql, type MigrationProvider, type MigrationResult } from 'kysely';
import type { Db } from './database.js';
import { migrations } from './migrations/index.js';
import { openStore, type Store, type StoreOptions } from './connect.js';
import { storeUnavailable } from './store-unavailable.js';

const provider: MigrationProvider = { getMigrations: async () => migrations };

/**
 * Brings the schema up to date. Kysely's migrator takes a lock (an advisory lock on PostgreSQL),
 * so several processes starting at once migrate exactly once. On PostgreSQL the migrator's own
 * tables are pinned to the connection's current schema: without that it looks for them in any
 * schema and, with several carepath schemas in one database, finds another one's.
 */
export async function migrateToLatest(db: Db, dialect: 'sqlite' | 'postgres'): Promise<MigrationResult[]> {
  let migrationTableSchema: string | undefined;
  if (dialect === 'postgres') {
    const result = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
    migrationTableSchema = result.rows[0]?.schema;
  }
  const migrator = new Migrator({ db, provider, migrationTableSchema });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return results ?? [];
}

/**
 * Opens the store and, unless `migrate` is false, brings its schema up to date: what the service
 * and `carepath migrate` do first. A store that cannot be reached or opened is closed again and
 * comes back as one plain sentence (store-unavailable.ts); other failures keep their own error.
 */
export async function openMigratedStore(
  databaseUrl: string,
  options: { storeOptions?: StoreOptions; migrate?: boolean } = {},
): Promise<{ store: Store; applied: MigrationResult[] }> {
  let store: Store | undefined;
  try {
    store = openStore(databaseUrl, options.storeOptions);
    const applied = options.migrate === false ? [] : await migrateToLatest(store.db, store.dialect);
    return { store, applied };
  } catch (error) {
    await store?.close().catch(() => undefined);
    throw storeUnavailable(databaseUrl, error) ?? error;
  }
}
