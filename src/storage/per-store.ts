/**
 * Process memory kept per store: one value for each open store, whatever handle reaches it (the
 * database or one of its transactions share their store's adapter object), gone with the store.
 * Search keeps its caches this way; two stores open in one process (tests, benchmarks) never
 * share them.
 */
import type { Kysely } from 'kysely';

export function perStore<T>(make: () => T): (db: Pick<Kysely<unknown>, 'getExecutor'>) => T {
  const values = new WeakMap<object, T>();
  return (db) => {
    const adapter = db.getExecutor().adapter;
    let value = values.get(adapter);
    if (value === undefined) values.set(adapter, (value = make()));
    return value;
  };
}
