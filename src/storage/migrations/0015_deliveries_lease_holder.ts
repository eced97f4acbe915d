/**
 * `deliveries_lease_holder (id, status, lease_owner)`: the check that begins every processing
 * transaction on SQLite (which of these deliveries does this processor still hold?) answered
 * from an index.
 *
 * Why: it read the deliveries' rows for their lease, and on SQLite a row holds its stored body
 * before the lease columns, so the check read through every body: through the claim index
 * `(status, …)`, through the body of every delivery in processing. A delivery applied in parts
 * (migration 0014) is checked once a part: 20 MiB read 143 times for one large delivery, about
 * 15 ms a part (a --cpu-prof of the service, 2026-11-27). From this index the check reads no row.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('deliveries_lease_holder').on('deliveries').columns(['id', 'status', 'lease_owner']).execute();
}
