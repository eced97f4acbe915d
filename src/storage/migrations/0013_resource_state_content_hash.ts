/**
 * `resource_states.content_hash`: a hash of the resource as last delivered, so a delivery that
 * sends it again unchanged (a nightly full export, a sender's retry under a new key) raises no
 * `.updated` event. Null for every state before it: the next delivery of such a resource raises
 * `.updated` as before and stores its hash.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('resource_states').addColumn('content_hash', 'text').execute();
}
