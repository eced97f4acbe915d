/**
 * `triggers.last_tick_at`: the latest schedule tick a search trigger ran, set by the claim of
 * each tick. A tick at or before it is never run again: a PATCH of the schedule (or turning the
 * trigger back on) computed `next_run_at` from the clock of the process that served it, and from
 * a clock a little behind, or just before a tick that another process ran meanwhile, it set a
 * tick that had already run, which ran again (a second run for every patient of the cohort).
 * Null for every trigger before it and for a trigger that has not ticked.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('triggers').addColumn('last_tick_at', 'text').execute();
}
