/**
 * Several carepath schemas in one PostgreSQL database (deployments, or test files): starting one
 * never reads another's tables, so one being created or dropped meanwhile cannot fail it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { openStore, type Store } from '../../src/storage/connect.js';
import { migrateToLatest, slowMigrationMessage } from '../../src/storage/migrate.js';
import pg from 'pg';
import { POSTGRES_URL } from '../helpers/stores.js';
import { freshStore, type FreshStore } from '../helpers/stores.js';

describe('PostgreSQL schemas side by side', () => {
  const opened: { fresh: FreshStore; store: Store }[] = [];
  afterAll(async () => {
    for (const { fresh, store } of opened) {
      await store.close();
      await fresh.dispose();
    }
  });

  async function newStore(): Promise<Store> {
    const fresh = await freshStore('postgres');
    const store = openStore(fresh.databaseUrl, fresh.storeOptions);
    opened.push({ fresh, store });
    return store;
  }

  it('says so when the migration waits on another process\'s lock, instead of waiting in silence', async () => {
    const mine = await newStore();
    // Kysely's migration lock on PostgreSQL: an advisory lock, held here by another session.
    const other = new pg.Client({ connectionString: POSTGRES_URL });
    await other.connect();
    try {
      await other.query('begin');
      await other.query('select pg_advisory_xact_lock(3853314791062309107)');
      const told: number[] = [];
      const migrating = migrateToLatest(mine.db, 'postgres', (waited) => told.push(waited), 150);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(told).toHaveLength(1);
      expect(told[0]).toBeGreaterThanOrEqual(0.1);
      await other.query('commit');
      await migrating;
      expect(slowMigrationMessage(5)).toMatch(/^bringing the schema up to date has taken 5 s: another process may be migrating it, or hold the migration lock/);
    } finally {
      await other.end();
    }
  });

  it('lists the tables of its own schema only', async () => {
    const mine = await newStore();
    const theirs = await newStore();
    await migrateToLatest(mine.db, 'postgres');
    await sql`create table only_theirs (id int)`.execute(theirs.db);
    const names = (await mine.db.introspection.getTables({ withInternalKyselyTables: true })).map((table) => table.name);
    expect(names).toContain('records');
    expect(names).toContain('kysely_migration');
    expect(names).not.toContain('only_theirs');
    // Without being asked, the migrator's own tables are left out, as Kysely's introspector does.
    expect((await mine.db.introspection.getTables()).map((table) => table.name)).not.toContain('kysely_migration');
    const schemas = new Set((await mine.db.introspection.getTables()).map((table) => table.schema));
    expect(schemas.size).toBe(1);
  });

  it('migrates while other schemas are created and dropped around it', async () => {
    const churn = (async () => {
      for (let i = 0; i < 20; i++) {
        const other = await freshStore('postgres');
        const store = openStore(other.databaseUrl, other.storeOptions);
        await sql`create table kysely_migration (name varchar(255) primary key, timestamp varchar(255))`.execute(store.db);
        await store.close();
        await other.dispose();
      }
    })();
    for (let i = 0; i < 5; i++) {
      const store = await newStore();
      expect((await migrateToLatest(store.db, 'postgres')).length).toBeGreaterThan(0);
    }
    await churn;
  });
});
