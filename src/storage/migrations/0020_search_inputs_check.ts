/**
 * PostgreSQL: `carepath_search_inputs_unchanged(workspace, type, tags, chunks)`, whether the
 * store still holds what a search's matches were computed from: exactly the stored chunks
 * `chunks` (`tag|chunk|version`) for `tags` of records of that type in the workspace (as many,
 * and none other), and no change to those tags in the change log (migration 0004). Every read
 * goes through an index, whatever the statistics say.
 *
 * Why: a search asked again is one named statement that makes this check before it walks
 * (modules/search `findUnchangedPage`). PostgreSQL keeps a named statement's generic plan for the
 * life of the connection; made while the log was empty, as it is most of the time, the check
 * read the log with a sequential scan, and then scanned it whole while another workspace's
 * changes waited to be folded (200,000 of them: 2 → 21 ms a search, until an ANALYZE made the plan
 * again); made while `tag_bitmaps` was small, it scanned every workspace's chunks (290 ms a
 * search with 200,000 of them). A function's SET is in force while PL/pgSQL plans its queries,
 * so they are planned with the indexes, and the plans are kept per connection as a named
 * statement's is. `search_path` is the one the migration ran with: the function reads its own
 * schema's tables whoever calls it.
 *
 * STABLE: the function reads with the snapshot of the statement that calls it. SQLite reads
 * the bitmaps in process: nothing to do there.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await sql`create or replace function carepath_search_inputs_unchanged(in_workspace text, in_type text, in_tags text[], in_chunks text[])
    returns boolean
    language plpgsql stable
    set enable_seqscan = off
    set search_path from current
    as $$
      begin
        return (select count(*) from tag_bitmaps b
                where b.workspace_id = in_workspace and b.resource_type = in_type and b.tag = any(in_tags)) = cardinality(in_chunks)
           and not exists (select from tag_bitmaps b
                           where b.workspace_id = in_workspace and b.resource_type = in_type and b.tag = any(in_tags)
                             and (b.tag || '|' || b.chunk::text || '|' || b.version::text) <> all(in_chunks))
           and not exists (select from record_tag_changes c
                           where c.workspace_id = in_workspace and c.resource_type = in_type and c.tag = any(in_tags));
      end $$`.execute(db);
}
