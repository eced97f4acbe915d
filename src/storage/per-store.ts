/**
 * Process memory kept per store: one value for each open store, whatever handle reaches it (the
 * database or one of its transactions share their store's adapter object), gone with the store.
 * Search keeps its caches this way; two stores open in one process (tests, benchmarks) never
 * share them.
 */
import type { Kysely } from 'kysely';
import { weakMemo } from '../lib/weak-memo.js';

export function perStore<T>(make: () => T): (db: Pick<Kysely<unknown>, 'getExecutor'>) => T {
  const valueOf = weakMemo((_adapter: object) => make());
  return (db) => valueOf(db.getExecutor().adapter);
}
