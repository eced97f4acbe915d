/**
 * The runs indexes by trigger lead with the workspace, as every query over them reads it: with
 * `(trigger_id, id)` and `(trigger_id, automation_status)`, PostgreSQL walked a whole workspace's
 * runs for another workspace's trigger id (1 s for 0 rows at a million runs), counted a trigger's
 * runs by status from the table (0.6–0.9 s for 600,000 runs), and listed a trigger's runs of one
 * status by walking the status index (up to 1.5 s); SQLite read a table row per entry (a scale
 * review). The new ones answer a trigger's runs in id order, with one status or all, and its
 * counts from the index alone. Same number of indexes on `runs` as before.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('runs_trigger').execute();
  await db.schema.dropIndex('runs_trigger_status').execute();
  await db.schema.createIndex('runs_by_trigger').on('runs').columns(['workspace_id', 'trigger_id', 'id']).execute();
  await db.schema
    .createIndex('runs_by_trigger_status')
    .on('runs')
    .columns(['workspace_id', 'trigger_id', 'automation_status', 'id'])
    .execute();
}
