import { Migrator, sql, type MigrationProvider, type MigrationResult } from 'kysely';
import type { Db } from './database.js';
import { migrations } from './migrations/index.js';
import { accessSync, constants, existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { openStore, sqlitePathOf, type Store, type StoreOptions } from './connect.js';
import { storeUnavailable } from './store-unavailable.js';

const provider: MigrationProvider = { getMigrations: async () => migrations };

/**
 * Brings the schema up to date. Kysely's migrator takes a lock (an advisory lock on PostgreSQL),
 * so several processes starting at once migrate exactly once. On PostgreSQL the migrator's own
 * tables are pinned to the connection's current schema: without that it looks for them in any
 * schema and, with several carepath schemas in one database, finds another one's.
 */
export async function migrateToLatest(
  db: Db,
  dialect: 'sqlite' | 'postgres',
  onSlow?: SlowMigrationListener,
  slowAfterMs = 5_000,
): Promise<MigrationResult[]> {
  const stopWatching = onSlow ? watchForSlowness(onSlow, slowAfterMs) : () => {};
  try {
    return await migrate(db, dialect);
  } finally {
    stopWatching();
  }
}

/** Told how long the migration has taken, after 5 s (`slowAfterMs`) and every 30 s after that. */
export type SlowMigrationListener = (waitedSeconds: number) => void;

/** The sentence an operator sees when a start or `carepath migrate` waits on the schema. */
export function slowMigrationMessage(waitedSeconds: number): string {
  return `bringing the schema up to date has taken ${waitedSeconds} s: another process may be migrating it, or hold the migration lock (on PostgreSQL an advisory lock; see pg_locks); this goes on by itself once it is free`;
}

/**
 * A start that waits for the migration lock used to say nothing: a process another one held up
 * (or a session left holding the lock) stayed silent and never listened, for as long as the
 * lock was held (Kysely waits up to an hour).
 */
function watchForSlowness(onSlow: SlowMigrationListener, firstAfterMs: number): () => void {
  const started = Date.now();
  let timer: NodeJS.Timeout;
  const tell = (delayMs: number) => {
    timer = setTimeout(() => {
      onSlow(Math.round((Date.now() - started) / 100) / 10);
      tell(30_000);
    }, delayMs);
    timer.unref();
  };
  tell(firstAfterMs);
  return () => clearTimeout(timer);
}

async function migrate(db: Db, dialect: 'sqlite' | 'postgres'): Promise<MigrationResult[]> {
  let migrationTableSchema: string | undefined;
  if (dialect === 'postgres') {
    const result = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
    migrationTableSchema = result.rows[0]?.schema;
  }
  const migrator = new Migrator({ db, provider, migrationTableSchema });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw newerStoreError(error) ?? (error instanceof Error ? error : new Error(String(error)));
  return results ?? [];
}

/** Thrown for a store a newer carepath has migrated: this version does not know its schema. */
export class StoreNewerThanCodeError extends Error {
  constructor(readonly migration: string) {
    super(
      `the store was brought up to date by a newer carepath: it has migration ${migration}, which this version does not know. ` +
        'Run that version (or a newer one) on it, or restore a backup taken before the upgrade: carepath never migrates a store back',
    );
    this.name = 'StoreNewerThanCodeError';
  }
}

/**
 * Kysely refuses a store with a migration it was not given as "corrupted migrations: previously
 * executed migration … is missing", which sent an operator rolling back to repair a store that
 * was fine (an upgrade review): said as what it is.
 */
function newerStoreError(error: unknown): StoreNewerThanCodeError | null {
  const missing = /previously executed migration (\S+) is missing/.exec(error instanceof Error ? error.message : String(error));
  return missing ? new StoreNewerThanCodeError(missing[1]) : null;
}

/**
 * A SQLite file, and its folder (where the WAL and its index are made), must be writable by this
 * process. SQLite opens a file it may not write without a word (an immutable file, a read-only
 * mount, another user's file), takes its writes into the WAL, and fails only when it checkpoints:
 * the service said `listening`, then died on `attempt to write a readonly database`, naming no
 * file (an observability review, 2026-11-27). Checked before opening, it is a sentence at start.
 */
function assertSqliteWritable(databaseUrl: string): void {
  const file = sqlitePathOf(databaseUrl);
  if (file === null) return;
  for (const path of [file, dirname(resolve(file))]) if (existsSync(path)) accessSync(path, constants.W_OK);
}

/**
 * Opens the store and, unless `migrate` is false, brings its schema up to date: what the service
 * and `carepath migrate` do first. A store that cannot be reached or opened is closed again and
 * comes back as one plain sentence (store-unavailable.ts); other failures keep their own error.
 */
export async function openMigratedStore(
  databaseUrl: string,
  options: { storeOptions?: StoreOptions; migrate?: boolean; onSlow?: SlowMigrationListener } = {},
): Promise<{ store: Store; applied: MigrationResult[] }> {
  let store: Store | undefined;
  try {
    assertSqliteWritable(databaseUrl);
    store = openStore(databaseUrl, options.storeOptions);
    const applied = options.migrate === false ? [] : await migrateOwnConnections(databaseUrl, store, options);
    return { store, applied };
  } catch (error) {
    await store?.close().catch(() => undefined);
    throw storeUnavailable(databaseUrl, error) ?? error;
  }
}

/**
 * On PostgreSQL, migrations run on connections of their own without the service's query
 * timeout (an index over millions of rows may take minutes); SQLite has the one connection.
 */
async function migrateOwnConnections(
  databaseUrl: string,
  store: Store,
  options: { storeOptions?: StoreOptions; onSlow?: SlowMigrationListener },
): Promise<MigrationResult[]> {
  if (store.dialect !== 'postgres') return migrateToLatest(store.db, store.dialect, options.onSlow);
  const migrating = openStore(databaseUrl, { ...options.storeOptions, poolSize: 2, queryTimeoutMs: 0 });
  try {
    return await migrateToLatest(migrating.db, migrating.dialect, options.onSlow);
  } finally {
    await migrating.close();
  }
}
