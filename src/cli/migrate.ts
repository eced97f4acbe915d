/** `carepath migrate`: brings the store's schema up to date and says what it applied. */
import type { Config } from '../config.js';
import { openStore, type Store } from '../storage/connect.js';
import { storeUnavailable } from '../storage/store-unavailable.js';
import { migrateToLatest } from '../storage/migrate.js';

/** Names of the migrations applied now; empty when the schema was already current. */
export async function runMigrations(config: Config): Promise<string[]> {
  let store: Store | undefined;
  try {
    store = openStore(config.databaseUrl);
    const results = await migrateToLatest(store.db, store.dialect);
    return results.filter((result) => result.status === 'Success').map((result) => result.migrationName);
  } catch (error) {
    throw storeUnavailable(config.databaseUrl, error) ?? error;
  } finally {
    await store?.close();
  }
}

export function describeMigrations(applied: string[]): string {
  if (applied.length === 0) return 'The schema is up to date; nothing to apply.\n';
  return `Applied ${applied.length} migration${applied.length === 1 ? '' : 's'}: ${applied.join(', ')}\n`;
}
