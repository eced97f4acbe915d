/**
 * PostgreSQL: the change-log triggers on `record_tags` (migration 0004) find each tag's record
 * with a lookup that cannot turn into a scan of `records`.
 *
 * Why: 0004's trigger functions join the transition table to `records`. PL/pgSQL keeps the plan
 * of that join for the life of the connection, made with the statistics of the moment; planned
 * while `records` was small, it scans the whole table on every statement afterwards, until the
 * next ANALYZE. Measured: the trigger of one run-creation batch of 50 took 1.0 ms at 10,000
 * records and 3.7 ms at 20,000, and would take seconds at millions; with the lookup below it
 * stays at about 0.5 ms. A LATERAL subquery with LIMIT is never flattened into a join, so it is
 * always a lookup in the primary key, one per changed row, whatever the statistics say.
 *
 * SQLite's triggers are row-level and already look the record up by its unique id: unchanged.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

const TAG_TRIGGERS = [
  { fn: 'record_tags_logged_in', present: 1 },
  { fn: 'record_tags_logged_out', present: 0 },
] as const;

export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  for (const { fn, present } of TAG_TRIGGERS) {
    await sql.raw(`create or replace function ${fn}() returns trigger language plpgsql as $$
      begin
        insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
        select changed.workspace_id, r.resource_type, changed.tag, r.seq, ${present}
        from changed
        cross join lateral (select resource_type, seq from records where records.id = changed.record_id limit 1) r
        order by r.seq;
        return null;
      end $$`).execute(db);
  }
}
