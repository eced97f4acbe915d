/**
 * The automation engine's schema: leases and timers on runs, the step timeline, event waits.
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 * The same statements serve SQLite and PostgreSQL (text ids, ISO text times, 0/1 integers,
 * text JSON).
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // One column per ALTER: SQLite adds a single column per statement.
  // lease_owner: the worker holding the run, or null. lease_fence: raised by every claim; every
  // write a worker makes names the fence it claimed with, so a worker whose lease was taken
  // writes nothing. available_at: when a worker may next claim the run (the lease's end while
  // one is held, the timer while it waits); the epoch default means "now" for every new run.
  // wake_seq: raised when an event makes a waiting run due, so a worker never releases a run
  // past a wake-up it has not seen. engine_state: JSON of the run's progress through its graph.
  await db.schema.alterTable('runs').addColumn('lease_owner', 'text').execute();
  await db.schema
    .alterTable('runs')
    .addColumn('lease_fence', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('runs')
    .addColumn('available_at', 'text', (c) => c.notNull().defaultTo('1970-01-01T00:00:00.000Z'))
    .execute();
  await db.schema
    .alterTable('runs')
    .addColumn('wake_seq', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('runs').addColumn('engine_state', 'text').execute();
  // Only runs a worker may execute are in the claim index, so it stays as small as the work.
  await db.schema
    .createIndex('runs_claimable')
    .on('runs')
    .column('available_at')
    .where(sql<boolean>`automation_status in ('scheduled', 'running')`)
    .execute();

  await db.schema
    .createTable('run_steps')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('node_id', 'text', (c) => c.notNull())
    .addColumn('automation_id', 'text', (c) => c.notNull())
    .addColumn('automation_type', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .addColumn('outcome', 'text')
    .addColumn('output', 'text')
    .addColumn('error', 'text')
    .execute();
  await db.schema.createIndex('run_steps_run').on('run_steps').columns(['run_id', 'id']).execute();

  await db.schema
    .createTable('run_event_waits')
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('node_id', 'text', (c) => c.notNull())
    .addColumn('automation_id', 'text', (c) => c.notNull())
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('subject_record_id', 'text', (c) => c.notNull())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('received_at', 'text')
    .addColumn('received_event', 'text')
    .addPrimaryKeyConstraint('run_event_waits_pk', ['run_id', 'node_id'])
    .execute();
  await db.schema
    .createIndex('run_event_waits_subject')
    .on('run_event_waits')
    .columns(['workspace_id', 'subject_record_id', 'event'])
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('carepath migrations are forward-only; restore a backup to go back');
}
