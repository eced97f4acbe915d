/**
 * Runs `work` in a transaction: the caller's, when it already holds one (a seed or an import that
 * writes many things together), else a new one. Kysely cannot nest transactions, and a function
 * that must be atomic on its own should not care which case it is in.
 */
import type { Transaction } from 'kysely';
import type { Database, DbOrTx } from './database.js';

export function withinTransaction<T>(db: DbOrTx, work: (tx: Transaction<Database>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db as Transaction<Database>) : db.transaction().execute(work);
}
