/**
 * The store's own clock, for two times that must follow the order in which transactions take
 * their locks: when a `wait_for_event` began and when a delivery raised its events. Each is
 * taken inside its transaction, after the locks on the patient that both take (engine/
 * event-waits.ts says why). On PostgreSQL that is the server's `clock_timestamp()`: processes on
 * several machines read one clock, so a few milliseconds of skew between them cannot put a wait
 * that began first after an event raised later. SQLite has one process: its own clock, read
 * when the transaction holds the one write lock.
 *
 * Text as every stored time: ISO 8601 in UTC with milliseconds (`2026-11-28T10:30:00.000Z`).
 */
import { sql, type RawBuilder } from 'kysely';
import type { DbOrTx } from './database.js';
import { dialectOfDb } from './dialect.js';

const POSTGRES_NOW = sql<string>`to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** The store's clock as a value for a column of the statement that writes it. */
export function storeNowValue(db: DbOrTx): RawBuilder<string> | string {
  return dialectOfDb(db) === 'postgres' ? POSTGRES_NOW : new Date().toISOString();
}

/** The store's clock now (one round trip on PostgreSQL). */
export async function readStoreNow(db: DbOrTx): Promise<string> {
  if (dialectOfDb(db) !== 'postgres') return new Date().toISOString();
  const { rows } = await sql<{ now: string }>`select ${POSTGRES_NOW} as now`.execute(db);
  return rows[0].now;
}
