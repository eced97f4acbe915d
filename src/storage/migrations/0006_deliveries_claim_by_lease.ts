/**
 * The claim of deliveries reads its condition from an index: `(status, lease_expires_at, id)`
 * replaces `(status, id)`.
 *
 * Why: a claim takes deliveries that are `received`, or `processing` with a lease that ran out.
 * With `(status, id)` the lease had to be read from each processing row; on SQLite a row holds
 * its stored body (the lease column comes after it), so a claim read through the body of every
 * delivery in flight: about 70 µs a claim with a few dozen 30-resource bodies in flight, and
 * seconds' worth of pages with a backlog of thousands (docs/benchmarks.md, 2026-11-26). From
 * this index the claim finds exactly the rows it takes. Received rows have no lease (null), so
 * within a status the index is still in id order.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('deliveries_claim_by_lease').on('deliveries').columns(['status', 'lease_expires_at', 'id']).execute();
  await db.schema.dropIndex('deliveries_claim').execute();
}
