/**
 * Next runs that versions before 2026-11-27 stored and that are wrong today: an inactive or
 * deleted trigger kept the `next_run_at` it had (shown as its `nextRunAt`, though an inactive
 * trigger has none), and a tick past the year 9999 was stored as `+010000-…`, which sorts before
 * every time and was due for ever. The code now writes neither; this clears what it left.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    update triggers set next_run_at = null
    where next_run_at is not null and (active = 0 or deleted_at is not null or next_run_at like '+%')`.execute(db);
}
