/**
 * `triggers.when_expression`: an event trigger's optional FHIRPath condition over the run it
 * would start (`{payload: {event, resource, deliveryId}}`); a run starts only when it holds. Null
 * for every trigger before it, and for triggers of other types.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('triggers').addColumn('when_expression', 'text').execute();
}
