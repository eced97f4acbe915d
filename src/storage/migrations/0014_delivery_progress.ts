/**
 * `delivery_progress`: how far a delivery applied in parts has come. A delivery with more items
 * than one transaction should hold (20 MiB of small resources is about 150,000) is applied a
 * part at a time, each part in its own transaction, so the store and the serving thread are not
 * held for seconds; each part's transaction also moves this row on, so a process that dies
 * between parts leaves the next one exactly where to go on. The totals so far (events, runs
 * started, wakes to hand over) wait here for the last part, which writes them onto the delivery
 * and deletes the row.
 *
 * A row of its own rather than columns of `deliveries`: on SQLite an UPDATE rewrites the whole
 * row, and a delivery's row holds its body (up to 20 MiB) until it is processed.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('delivery_progress')
    .addColumn('delivery_id', 'text', (c) => c.primaryKey())
    // Items (in delivery order) whose changes are committed.
    .addColumn('applied_items', 'integer', (c) => c.notNull())
    // JSON [{event, count}] raised so far.
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('runs_started', 'integer', (c) => c.notNull())
    // JSON wakes decided so far, handed to waiting runs once the last part commits; null for none.
    .addColumn('pending_wakes', 'text')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}
