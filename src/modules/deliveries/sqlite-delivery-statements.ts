/**
 * The hot statements of inbound data on SQLite, prepared once per connection and run through
 * better-sqlite3 directly (PostgreSQL, and everything not on the per-delivery path, stay on
 * Kysely). Same SQL as the Kysely repositories beside this file, same results.
 *
 * Why: per delivery of 30 resources the intake and the processor ran about a dozen statements,
 * and building and compiling each with Kysely cost more CPU than SQLite's own work (--cpu-prof
 * of `npm run bench -- ingestion`: Kysely 17 % of the CPU, SQLite 20 %). Statement texts here do
 * not depend on the number of rows: lists travel as one JSON parameter (`json_each`) or as one
 * single-row statement run per row, which on SQLite does the same B-tree work as a multi-row one.
 *
 * Rules for callers: run these synchronously while Kysely holds the one connection, that is
 * inside a Kysely transaction on it (the processor's) or inside `db.connection().execute(…)`
 * (the intake's autocommit INSERT), so no other caller's transaction is open around them.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { Db, DeliveryTable } from '../../storage/database.js';
import { sqliteConnectionOf } from '../../storage/connect.js';
import { weakMemo } from '../../lib/weak-memo.js';

export interface SqliteDeliveryStatements {
  insertDelivery: BetterSqlite3.Statement;
  claim: BetterSqlite3.Statement;
  claimWithBodies: BetterSqlite3.Statement;
  readStates: BetterSqlite3.Statement;
  upsertStates: BetterSqlite3.Statement;
  deleteState: BetterSqlite3.Statement;
  markProcessed: BetterSqlite3.Statement;
  findRecord: BetterSqlite3.Statement;
  insertRecord: BetterSqlite3.Statement;
  renameRecord: BetterSqlite3.Statement;
  deleteTagsIn: BetterSqlite3.Statement;
  insertTag: BetterSqlite3.Statement;
  deleteAllTags: BetterSqlite3.Statement;
  deleteRecord: BetterSqlite3.Statement;
  heldLeases: BetterSqlite3.Statement;
}

/** Column order of `insertDelivery`'s parameters. */
export const DELIVERY_COLUMNS = [
  'id',
  'tenant_id',
  'workspace_id',
  'webhook_id',
  'request_id',
  'idempotency_key',
  'body_sha256',
  'body',
  'accepted',
  'status',
  'attempts',
  'lease_owner',
  'lease_expires_at',
  'received_at',
  'processed_at',
  'problems',
  'problem_count',
  'events',
  'runs_started',
  'error',
  'pending_wakes',
  'signature_t',
] as const satisfies readonly (keyof DeliveryTable)[];

const preparedOn = weakMemo(prepare);

/** Every column but the body, which lists and claims never need to carry around (claims return it only when asked). */
export const COLUMNS_WITHOUT_BODY = DELIVERY_COLUMNS.filter(
  (column): column is Exclude<(typeof DELIVERY_COLUMNS)[number], 'body'> => column !== 'body',
);

/** Received deliveries, and processing ones whose lease ran out (parameter: now). */
const CLAIMABLE = `(status = 'received' or (status = 'processing' and lease_expires_at < ?))`;

function claimStatement(connection: BetterSqlite3.Database, columns: readonly string[]): BetterSqlite3.Statement {
  // Parameters: owner, lease expiry, now, limit, now.
  return connection.prepare(
    `update deliveries set status = 'processing', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1
     where id in (select id from deliveries where ${CLAIMABLE} order by id limit ?) and ${CLAIMABLE}
     returning ${columns.join(', ')}`,
  );
}

function prepare(connection: BetterSqlite3.Database): SqliteDeliveryStatements {
  return {
    claim: claimStatement(connection, COLUMNS_WITHOUT_BODY),
    claimWithBodies: claimStatement(connection, DELIVERY_COLUMNS),
    insertDelivery: connection.prepare(
      `insert into deliveries (${DELIVERY_COLUMNS.join(', ')}) values (${DELIVERY_COLUMNS.map(() => '?').join(', ')})
       on conflict do nothing`,
    ),
    // `cross join` keeps the keys as the outer loop: one index probe per key (resource-state.repository.ts).
    readStates: connection.prepare(
      `select s.resource_type, s.resource_id, s.status, s.patient_id, s.source_tags, s.content_hash, s.last_updated, s.version_id, s.deleted
       from json_each(?) cross join resource_states s
       where s.workspace_id = ? and s.resource_type = value ->> 0 and s.resource_id = value ->> 1`,
    ),
    // `where true`: SQLite would read `on conflict` after a bare FROM as a join constraint.
    upsertStates: connection.prepare(
      `insert into resource_states (workspace_id, resource_type, resource_id, status, patient_id, source_tags, content_hash, last_updated, version_id, deleted, delivery_id, updated_at)
       select ?, value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6, value ->> 7, cast(value ->> 8 as integer), ?, ? from json_each(?) where true
       on conflict (workspace_id, resource_type, resource_id) do update set
         status = excluded.status, patient_id = excluded.patient_id, source_tags = excluded.source_tags,
         content_hash = excluded.content_hash, last_updated = excluded.last_updated, version_id = excluded.version_id,
         deleted = excluded.deleted, delivery_id = excluded.delivery_id, updated_at = excluded.updated_at`,
    ),
    deleteState: connection.prepare(`delete from resource_states where workspace_id = ? and resource_type = ? and resource_id = ?`),
    markProcessed: connection.prepare(
      `update deliveries set status = 'processed', processed_at = ?, body = null, lease_owner = ?, lease_expires_at = ?,
         pending_wakes = ?, problems = ?, problem_count = ?, events = ?, runs_started = ?, error = null
       where id = ? and status = 'processing' and lease_owner = ?`,
    ),
    findRecord: connection.prepare(`select id from records where workspace_id = ? and resource_type = ? and ext_id = ?`),
    insertRecord: connection.prepare(
      `insert into records (id, workspace_id, resource_type, ext_id, name, created_at, updated_at) values (?, ?, ?, ?, ?, ?, ?)
       on conflict (workspace_id, resource_type, ext_id) do nothing`,
    ),
    renameRecord: connection.prepare(`update records set name = ?, updated_at = ? where id = ?`),
    deleteTagsIn: connection.prepare(`delete from record_tags where record_id = ? and tag in (select value from json_each(?))`),
    insertTag: connection.prepare(`insert into record_tags (record_id, workspace_id, tag) values (?, ?, ?) on conflict (record_id, tag) do nothing`),
    deleteAllTags: connection.prepare(`delete from record_tags where record_id = ?`),
    deleteRecord: connection.prepare(`delete from records where id = ?`),
    // Once per group of deliveries (delivery-apply.ts); a read, not the UPDATE of holdLeases: see delivery.repository.ts holdLeasesSqlite.
    heldLeases: connection.prepare(
      `select id from deliveries where id in (select value from json_each(?)) and status = 'processing' and lease_owner = ?`,
    ),
  };
}

/** The statements of `db`'s SQLite connection; undefined on PostgreSQL. */
export function sqliteDeliveryStatementsOf(db: Db): SqliteDeliveryStatements | undefined {
  const connection = sqliteConnectionOf(db);
  return connection ? preparedOn(connection) : undefined;
}
