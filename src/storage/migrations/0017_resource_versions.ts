/**
 * `resource_states.last_updated` and `version_id`: the version of each resource as last applied
 * (its `meta.lastUpdated` and `meta.versionId`), so a late delivery of an older version is not
 * applied over a newer one. Null for every state before it: the next delivery of such a resource
 * is applied as before and stores its version.
 *
 * `delivery_progress.skipped`: the items a delivery applied in parts skipped so far for being
 * older than what is stored (JSON [{index, message}]; null for none), listed on the delivery
 * with its other skipped items once the last part commits.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('resource_states').addColumn('last_updated', 'text').execute();
  await db.schema.alterTable('resource_states').addColumn('version_id', 'text').execute();
  await db.schema.alterTable('delivery_progress').addColumn('skipped', 'text').execute();
}
