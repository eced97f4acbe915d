/**
 * PostgreSQL: `carepath_tag_changes_logged(workspace, type, tags)`, whether the tag change log
 * (migration 0004) holds a change to any of `tags` of records of that type in the workspace,
 * always answered through `record_tag_changes_by_tag`.
 *
 * Why: a search asked again is one named statement that checks the store still holds what its
 * matches came from (modules/search `findUnchangedPage`), the log among it. PostgreSQL keeps a
 * named statement's generic plan for the life of the connection; made while the log was empty,
 * as it is most of the time, that plan read the log with a sequential scan, and went on scanning
 * it whole while another workspace's burst of changes waited to be folded: 20,000 rows took a
 * search from 4.7 to 7.5 ms at p50 until an ANALYZE made the plan again. A function's SET is in
 * force while PL/pgSQL plans its query, so this lookup is planned with the index whatever the
 * statistics say, and its plan is kept per connection as a named statement's is.
 *
 * The function reads with the snapshot of the statement that calls it (STABLE). SQLite reads
 * the log itself, in process: nothing to do there.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await sql`create function carepath_tag_changes_logged(in_workspace text, in_type text, in_tags text[]) returns boolean
    language plpgsql stable
    set enable_seqscan = off
    as $$
      begin
        return exists (select from record_tag_changes c
                       where c.workspace_id = in_workspace and c.resource_type = in_type and c.tag = any(in_tags));
      end $$`.execute(db);
}
