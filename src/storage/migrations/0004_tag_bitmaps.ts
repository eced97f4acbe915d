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
    // The id of the last change folded into the chunk: changes with every rewrite and never comes
    // back (each change is folded once), so a reader that holds a chunk of this version can skip
    // reading its bits again.
    .addColumn('version', 'bigint', (c) => c.notNull())
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

/**
 * One logging trigger per table and event. `rows` selects the log rows, with `$row` for the
 * changed row (SQLite: `new`/`old`; PostgreSQL: the transition table), `$rows` for where it comes
 * from, and `$present` for 1 (insert) or 0 (delete).
 */
const RECORD_ROWS = `select $row.workspace_id, $row.resource_type, '*', $row.seq, $present from $rows`;
const TAG_ROWS = `select $row.workspace_id, r.resource_type, $row.tag, r.seq, $present from $rows join records r on r.id = $row.record_id`;
const LOGGED = [
  { trigger: 'records_logged_in', table: 'records', event: 'insert', rows: RECORD_ROWS },
  { trigger: 'records_logged_out', table: 'records', event: 'delete', rows: RECORD_ROWS },
  { trigger: 'record_tags_logged_in', table: 'record_tags', event: 'insert', rows: TAG_ROWS },
  { trigger: 'record_tags_logged_out', table: 'record_tags', event: 'delete', rows: TAG_ROWS },
] as const;

const LOG_INSERT = 'insert into record_tag_changes (workspace_id, resource_type, tag, seq, present)';

function fill(rows: string, event: 'insert' | 'delete', from: string, row: string): string {
  return rows
    .replaceAll('$rows', from)
    .replaceAll('$row', row)
    .replaceAll('$present', event === 'insert' ? '1' : '0');
}

/** SQLite: row-level triggers; the changed row is `new` (insert) or `old` (delete). */
async function createTriggersSqlite(db: Kysely<unknown>): Promise<void> {
  for (const { trigger, table, event, rows } of LOGGED) {
    const row = event === 'insert' ? 'new' : 'old';
    // SQLite has no FROM-less join: the changed row is a one-row subquery.
    const select = fill(rows, event, `(select 1) as changed`, row);
    await sql.raw(`create trigger ${trigger} after ${event} on ${table} begin ${LOG_INSERT} ${select}; end`).execute(db);
  }
}

/**
 * PostgreSQL: statement-level triggers with transition tables, so a batch of a thousand rows
 * logs its changes in one insert. They run at the end of the statement, when rows inserted by
 * sibling CTEs of the same statement (the run creator's single-statement batch) are visible.
 */
async function createTriggersPostgres(db: Kysely<unknown>): Promise<void> {
  for (const { trigger, table, event, rows } of LOGGED) {
    const select = fill(rows, event, 'changed', 'changed');
    await sql.raw(`create function ${trigger}() returns trigger language plpgsql as $$
      begin ${LOG_INSERT} ${select} order by seq; return null; end $$`).execute(db);
    await sql.raw(`create trigger ${trigger} after ${event} on ${table}
      referencing ${event === 'insert' ? 'new' : 'old'} table as changed for each statement execute function ${trigger}()`).execute(db);
  }
}
