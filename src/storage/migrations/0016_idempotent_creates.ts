/**
 * `idempotency_keys.made_id`: what a keyed create (a trigger, a saved query, a webhook endpoint)
 * made, so that a retry with the same key and body answers it instead of making a second one.
 * Null for the keys of fires and evaluations, whose runs are named by `run_id` and the runs'
 * own `idempotency_key`.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('idempotency_keys').addColumn('made_id', 'text').execute();
}
