/**
 * Inbound data (DESIGN §7, §9): stored webhook deliveries, what the service remembers of every
 * delivered resource, and runs decided but not yet created.
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 * The same statements serve SQLite and PostgreSQL (text ids, ISO text times, 0/1 integers,
 * JSON as text, the raw delivery body as text).
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // One row per accepted delivery, written before the 202 is sent. `body` is the raw request
  // body; it is cleared once the delivery is processed (the data then lives in records and
  // resource states), and kept on a failed delivery so an operator can look into it.
  await db.schema
    .createTable('deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('idempotency_key', 'text')
    .addColumn('body_sha256', 'text', (c) => c.notNull())
    .addColumn('body', 'text')
    .addColumn('accepted', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('lease_owner', 'text')
    .addColumn('lease_expires_at', 'text')
    .addColumn('received_at', 'text', (c) => c.notNull())
    .addColumn('processed_at', 'text')
    .addColumn('problems', 'text', (c) => c.notNull())
    .addColumn('problem_count', 'integer', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('runs_started', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    // Events to hand to runs waiting for them, decided in the processing transaction and
    // delivered right after it; null once delivered.
    .addColumn('pending_wakes', 'text')
    // Null keys never collide (both stores treat NULLs as distinct in a unique constraint).
    .addUniqueConstraint('deliveries_idempotency', ['webhook_id', 'idempotency_key'])
    .execute();
  await db.schema.createIndex('deliveries_list').on('deliveries').columns(['webhook_id', 'id']).execute();
  await db.schema.createIndex('deliveries_claim').on('deliveries').columns(['status', 'id']).execute();
  // Only deliveries whose wakes are still to be handed over: the sweep for them stays as small as
  // the work, however many processed deliveries the table holds.
  await db.schema
    .createIndex('deliveries_pending_wakes')
    .on('deliveries')
    .column('lease_expires_at')
    .where(sql.ref('pending_wakes'), 'is not', null)
    .execute();

  // The last known state of every delivered resource: to tell created from updated, to raise a
  // status event only on a change, to know a deleted resource's patient, and which tags of a
  // record came from the resource (so an update replaces those and keeps tags set by pathways).
  await db.schema
    .createTable('resource_states')
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text')
    .addColumn('patient_id', 'text')
    .addColumn('source_tags', 'text')
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('resource_states_pk', ['workspace_id', 'resource_type', 'resource_id'])
    .execute();

  // Runs decided in the same transaction as their cause (a processed delivery, a claimed tick),
  // created right after through the run creator and then removed. A process that dies in between
  // leaves its rows with a lease that runs out; another process creates what is missing.
  await db.schema
    .createTable('planned_runs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('trigger_id', 'text', (c) => c.notNull())
    .addColumn('source_id', 'text', (c) => c.notNull())
    .addColumn('source_version', 'integer', (c) => c.notNull())
    .addColumn('blueprint_name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('payload', 'text')
    .addColumn('subject_record_id', 'text')
    .addColumn('idempotency_key', 'text')
    .addColumn('origin', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text')
    .addColumn('key_name', 'text', (c) => c.notNull())
    .addColumn('planned_at', 'text', (c) => c.notNull())
    .addColumn('lease_owner', 'text', (c) => c.notNull())
    .addColumn('lease_expires_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('planned_runs_lease').on('planned_runs').columns(['lease_expires_at']).execute();
  await db.schema.createIndex('planned_runs_subject').on('planned_runs').columns(['trigger_id', 'subject_record_id']).execute();
}

export async function down(): Promise<void> {
  throw new Error('carepath migrations are forward-only; restore a backup to go back');
}
