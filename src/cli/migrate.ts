/** `carepath migrate`: brings the store's schema up to date and says what it applied. */
import type { Config } from '../config.js';
import { openMigratedStore, slowMigrationMessage } from '../storage/migrate.js';

/** Names of the migrations applied now; empty when the schema was already current. */
export async function runMigrations(config: Config): Promise<string[]> {
  const { store, applied } = await openMigratedStore(config.databaseUrl, {
    onSlow: (waited) => process.stderr.write(`carepath migrate: ${slowMigrationMessage(waited)}\n`),
  });
  await store.close();
  return applied.filter((result) => result.status === 'Success').map((result) => result.migrationName);
}

export function describeMigrations(applied: string[]): string {
  if (applied.length === 0) return 'The schema is up to date; nothing to apply.\n';
  return `Applied ${applied.length} migration${applied.length === 1 ? '' : 's'}: ${applied.join(', ')}\n`;
}
