import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import type { StoreOptions } from '../../src/storage/connect.js';

/**
 * The stores every integration suite runs against. Each test file gets a fresh SQLite file and
 * a fresh PostgreSQL schema, so files never see each other's rows.
 */
export const STORE_KINDS = ['sqlite', 'postgres'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

export const POSTGRES_URL = process.env.CAREPATH_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface FreshStore {
  databaseUrl: string;
  storeOptions: StoreOptions;
  /** Removes the file or drops the schema. */
  dispose(): Promise<void>;
}

export async function freshStore(kind: StoreKind): Promise<FreshStore> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'carepath-test-'));
    return {
      databaseUrl: `sqlite:${join(dir, 'carepath.db')}`,
      storeOptions: {},
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const schema = `test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.end();
  return {
    databaseUrl: POSTGRES_URL,
    storeOptions: { schema, poolSize: 10 },
    dispose: async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query(`drop schema if exists ${schema} cascade`);
      await client.end();
    },
  };
}
