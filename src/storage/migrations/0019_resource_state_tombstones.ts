/**
 * `resource_states.deleted`: 1 for a resource a delivery deleted whose version is kept, so that
 * a late delivery of that version or an older one (a sender's retry, a second interface) is not
 * stored again and raises nothing. 0 for every state before it, which is what they are: stored.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('resource_states')
    .addColumn('deleted', 'integer', (column) => column.notNull().defaultTo(0))
    .execute();
}
