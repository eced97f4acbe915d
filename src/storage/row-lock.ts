import type { DbOrTx } from './database.js';
import { dialectOfDb } from './dialect.js';

/**
 * A SELECT that holds the rows it reads until the transaction ends: `FOR UPDATE` (or `FOR SHARE`)
 * on PostgreSQL; on SQLite as it is, since a write transaction there holds the whole store.
 * For a change decided on the row as it is (a PATCH), not as it was read before the transaction.
 */
export function holding<S extends { forUpdate(): S; forShare(): S }>(tx: DbOrTx, select: S, mode: 'update' | 'share' = 'update'): S {
  if (dialectOfDb(tx) !== 'postgres') return select;
  return mode === 'share' ? select.forShare() : select.forUpdate();
}
