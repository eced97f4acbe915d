/**
 * `runs.failures`: how many times in a row executing a run has failed unexpectedly (a store
 * error, a bug), since it last executed cleanly. A worker backs a failing run off (5 s, doubling,
 * at most 5 minutes) instead of retrying it every few seconds for ever, and `/metrics` counts the
 * runs being retried so, through the partial index, which holds only them.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('runs').addColumn('failures', 'integer', (column) => column.notNull().defaultTo(0)).execute();
  await db.schema
    .createIndex('runs_failing')
    .on('runs')
    .column('id')
    .where(sql<boolean>`failures > 0`)
    .execute();
}
