/**
 * The runs index by Idempotency-Key ends with the id, as the list reads it newest first:
 * `GET /v1/runs?idempotencyKey=` orders by id, and with `(workspace_id, idempotency_key)` SQLite
 * walked the workspace's runs newest first through `runs_list` (or, with `status`, the status's
 * runs through `runs_status`) to skip the sort, checking each run's key: 190 ms for a key that
 * names no run at 200,000 runs, on the one connection every request shares (a cost review). The
 * new one gives a key's runs in id order. Same number of indexes on `runs` as before.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('runs_idempotency').execute();
  await db.schema.createIndex('runs_by_idempotency_key').on('runs').columns(['workspace_id', 'idempotency_key', 'id']).execute();
}
