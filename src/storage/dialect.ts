/**
 * Which store a Kysely handle talks to, for the few statements whose SQL must differ (casts,
 * arrays, JSON functions). Read from the handle itself, so callers need not carry it around.
 */
import { PostgresAdapter, type Kysely } from 'kysely';
import type { Dialect } from './connect.js';

export function dialectOfDb(db: Pick<Kysely<unknown>, 'getExecutor'>): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}
