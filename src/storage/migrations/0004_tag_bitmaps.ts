/**
 * Search counts from tag bitmaps (DESIGN §8, docs/decisions.md "Search counts from tag bitmaps").
 *
 * Every record gets a `seq`: a small integer that never changes and is never reused, the record's
 * bit position. For each (workspace, resource type, tag) the store keeps which records carry the
 * tag as bitmaps of 65,536 bits (`tag_bitmaps`, one row per chunk); the pseudo-tag `*` (never a
 * valid slug) marks every record of the type, so `without`-only filters have a universe.
 *
 * Writers keep writing `records` and `record_tags` as before: triggers append every change to
 * `record_tag_changes`, an insert-only log (no hot rows, so concurrent writers never wait for one
 * another). A background compactor folds the log into the bitmaps and deletes what it folded in
 * the same transaction; readers read bitmaps and the not-yet-folded log in one statement, so
 * every change is seen exactly once whatever the compactor is doing.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import { PostgresAdapter, sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  if (postgres) await addSeqPostgres(db);
  else await addSeqSqlite(db);

  await db.schema
    .createTable('record_tag_changes')
    .addColumn('id', postgres ? 'bigint' : 'integer', (c) =>
      postgres ? c.primaryKey().generatedAlwaysAsIdentity() : c.primaryKey().autoIncrement(),
    )
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('tag', 'text', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('present', 'integer', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('record_tag_changes_by_tag')
    .on('record_tag_changes')
    .columns(['workspace_id', 'resource_type', 'tag', 'id'])
    .execute();

  await db.schema
    .createTable('tag_bitmaps')
    .addColumn('workspace_id', 'text', (c) => c.notNull())
    .addColumn('resource_type', 'text', (c) => c.notNull())
    .addColumn('tag', 'text', (c) => c.notNull())
    .addColumn('chunk', 'integer', (c) => c.notNull())
    .addColumn('bits', postgres ? 'bytea' : 'blob', (c) => c.notNull())
    .addPrimaryKeyConstraint('tag_bitmaps_pk', ['workspace_id', 'resource_type', 'tag', 'chunk'])
    .execute();

  if (postgres) {
    // The log is a queue: rows live for a fraction of a second, so its dead rows are vacuumed
    // after every few thousand deletes rather than after a fifth of the table (the default),
    // which for a nearly empty table would leave readers stepping over dead index entries.
    await sql`alter table record_tag_changes set (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000)`.execute(db);
    await createTriggersPostgres(db);
  }
  else await createTriggersSqlite(db);

  // Counting no longer walks record_tags by tag: one index entry less for every tag written.
  await db.schema.dropIndex('record_tags_by_tag').execute();

  // Records that exist already enter the log like new ones; the compactor folds them.
  await sql`insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
    select workspace_id, resource_type, '*', seq, 1 from records order by seq`.execute(db);
  await sql`insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
    select t.workspace_id, r.resource_type, t.tag, r.seq, 1
    from record_tags t join records r on r.id = t.record_id order by r.seq`.execute(db);
}

/**
 * SQLite: a table declared with a text primary key already has a hidden integer rowid, but VACUUM
 * may renumber it. Rebuilding the table with `seq INTEGER PRIMARY KEY AUTOINCREMENT` names that
 * rowid (stable, never reused) and keeps `id` unique: the same B-trees as before.
 */
async function addSeqSqlite(db: Kysely<unknown>): Promise<void> {
  await sql`create table records_with_seq (
    seq integer primary key autoincrement,
    id text not null unique,
    workspace_id text not null,
    resource_type text not null,
    ext_id text not null,
    name text not null,
    created_at text not null,
    updated_at text not null,
    constraint records_ext unique (workspace_id, resource_type, ext_id)
  )`.execute(db);
  await sql`insert into records_with_seq (seq, id, workspace_id, resource_type, ext_id, name, created_at, updated_at)
    select rowid, id, workspace_id, resource_type, ext_id, name, created_at, updated_at from records order by rowid`.execute(db);
  await sql`drop table records`.execute(db);
  await sql`alter table records_with_seq rename to records`.execute(db);
  for (const order of ['name', 'created_at', 'updated_at', 'ext_id']) {
    // In SQLite every index entry ends with the rowid, here `seq`: walking an order index yields
    // each record's bit position without touching the table.
    await db.schema
      .createIndex(`records_by_${order}`)
      .on('records')
      .columns(['workspace_id', 'resource_type', order, 'id'])
      .execute();
  }
}

/**
 * PostgreSQL: an identity column, filled for existing rows when it is added; never reused. The
 * order indexes carry `seq` too, so walking one in search's order is an index-only scan.
 */
async function addSeqPostgres(db: Kysely<unknown>): Promise<void> {
  await sql`alter table records add column seq bigint generated always as identity`.execute(db);
  await sql`create unique index records_seq on records (seq)`.execute(db);
  for (const order of ['name', 'created_at', 'updated_at', 'ext_id']) {
    await sql`drop index ${sql.ref(`records_by_${order}`)}`.execute(db);
    await sql`create index ${sql.ref(`records_by_${order}`)} on records (workspace_id, resource_type, ${sql.ref(order)}, id) include (seq)`.execute(db);
  }
}

async function createTriggersSqlite(db: Kysely<unknown>): Promise<void> {
  await sql`create trigger records_logged_in after insert on records begin
    insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
    values (new.workspace_id, new.resource_type, '*', new.seq, 1);
  end`.execute(db);
  await sql`create trigger records_logged_out after delete on records begin
    insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
    values (old.workspace_id, old.resource_type, '*', old.seq, 0);
  end`.execute(db);
  await sql`create trigger record_tags_logged_in after insert on record_tags begin
    insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
    select new.workspace_id, r.resource_type, new.tag, r.seq, 1 from records r where r.id = new.record_id;
  end`.execute(db);
  await sql`create trigger record_tags_logged_out after delete on record_tags begin
    insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
    select old.workspace_id, r.resource_type, old.tag, r.seq, 0 from records r where r.id = old.record_id;
  end`.execute(db);
}

/**
 * PostgreSQL: statement-level triggers with transition tables, so a batch of a thousand rows
 * logs its changes in one insert. They run at the end of the statement, when rows inserted by
 * sibling CTEs of the same statement (the run creator's single-statement batch) are visible.
 */
async function createTriggersPostgres(db: Kysely<unknown>): Promise<void> {
  await sql`create function records_log_in() returns trigger language plpgsql as $$
    begin
      insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
      select workspace_id, resource_type, '*', seq, 1 from added order by seq;
      return null;
    end $$`.execute(db);
  await sql`create function records_log_out() returns trigger language plpgsql as $$
    begin
      insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
      select workspace_id, resource_type, '*', seq, 0 from removed order by seq;
      return null;
    end $$`.execute(db);
  await sql`create function record_tags_log_in() returns trigger language plpgsql as $$
    begin
      insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
      select a.workspace_id, r.resource_type, a.tag, r.seq, 1 from added a join records r on r.id = a.record_id order by r.seq;
      return null;
    end $$`.execute(db);
  await sql`create function record_tags_log_out() returns trigger language plpgsql as $$
    begin
      insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)
      select d.workspace_id, r.resource_type, d.tag, r.seq, 0 from removed d join records r on r.id = d.record_id order by r.seq;
      return null;
    end $$`.execute(db);
  await sql`create trigger records_logged_in after insert on records
    referencing new table as added for each statement execute function records_log_in()`.execute(db);
  await sql`create trigger records_logged_out after delete on records
    referencing old table as removed for each statement execute function records_log_out()`.execute(db);
  await sql`create trigger record_tags_logged_in after insert on record_tags
    referencing new table as added for each statement execute function record_tags_log_in()`.execute(db);
  await sql`create trigger record_tags_logged_out after delete on record_tags
    referencing old table as removed for each statement execute function record_tags_log_out()`.execute(db);
}
