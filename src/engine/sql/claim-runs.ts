/**
 * Claims up to `limit` runs that a worker may execute: `scheduled` or `running`, and due
 * (`available_at` passed: never leased, lease expired, or timer due). Each claim raises the
 * run's fence and leases it to `owner` until `leaseUntil`, in one statement.
 *
 * PostgreSQL: `FOR UPDATE SKIP LOCKED` lets any number of workers claim side by side, each
 * skipping the rows another is claiming; no run goes to two. SQLite: one statement on one
 * connection is atomic already.
 *
 * It runs prepared (storage/hot-statement.ts). On PostgreSQL, a named (server-side prepared)
 * statement: a worker claims many times a second, and parsing and planning the same text each
 * time was CPU the database server, shared with the fire path and the worker on a small machine,
 * spent on nothing (src/engine/README.md, "Decisions"). On SQLite, a better-sqlite3 statement
 * prepared once per connection and run while Kysely's lock on the one serving connection is
 * held: no asynchronous round through the query executor for the worker's most frequent
 * statement. It stays one autocommit statement (its write lock is taken when it starts, so
 * another process committing meanwhile cannot make it fail).
 */
import type { DbOrTx } from '../../storage/database.js';
import { runHot, type HotStatement } from '../../storage/hot-statement.js';
import { numbered } from './prepared.js';
import type BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery } from 'kysely';
import { dialectOfDb } from '../../storage/dialect.js';
import { sqliteRunnerOf } from '../../storage/connect.js';
import { weakMemo } from '../../lib/weak-memo.js';

export interface ClaimedRunRow {
  id: string;
  workspace_id: string;
  trigger_id: string;
  automation_status: string;
  lease_fence: number;
  wake_seq: number;
  payload: string | null;
  subject_record_id: string | null;
  source_id: string;
  source_version: number;
  engine_state: string | null;
  /** Unexpected failures in a row so far (0 for a run that executed cleanly last time). */
  failures: number;
}

export async function claimRuns(
  db: DbOrTx,
  claim: { owner: string; now: string; leaseUntil: string; limit: number },
): Promise<ClaimedRunRow[]> {
  return runHot<ClaimedRunRow>(db, CLAIM, () => [claim.owner, claim.leaseUntil, claim.now, claim.limit]);
}

// Written once: this runs for every batch. Literal statuses, so the planner matches the partial
// index runs_claimable.
const claimText = (lock: string) => `update runs set lease_owner = ?, lease_fence = lease_fence + 1, available_at = ?
  where id in (
    select id from runs
    where automation_status in ('scheduled', 'running') and available_at <= ?
    order by available_at
    limit ?${lock}
  )
  returning id, workspace_id, trigger_id, automation_status, lease_fence, wake_seq, payload, subject_record_id, source_id, source_version, engine_state, failures`;
const CLAIM: HotStatement = { name: 'carepath_claim_runs_v2', sqlite: claimText(''), postgres: numbered(claimText(' for update skip locked')) };

/** A due run as read on SQLite, with its owner: set when its lease ran out rather than ended. */
export interface DueRunRow extends ClaimedRunRow {
  lease_owner: string | null;
  /** The row's place in the table (SQLite's rowid), by which a later read skips it cheaply. */
  seq: number;
}

/**
 * SQLite: up to `limit` due runs, read in the claim's order without claiming them: each is
 * claimed by its first write (claim-on-write.ts), or, when a lease ran out on it, by `takeOver`.
 * `skip` names (by `seq`) runs this worker read and whose first write is not committed yet:
 * still due in the store, they would fill the read otherwise. SQLite checks them against the
 * claim index's entries, without reading their rows.
 */
export async function readDueRuns(db: DbOrTx, read: { now: string; limit: number; skip: readonly number[] }): Promise<DueRunRow[]> {
  if (dialectOfDb(db) === 'postgres') throw new Error('runs are read unclaimed on SQLite only; PostgreSQL claims them (claimRuns)');
  const params = [read.now, JSON.stringify(read.skip), read.limit];
  const run = sqliteRunnerOf(db);
  if (run) return run((connection) => (dueStatementOf(connection).all(...params) as DueRunColumns[]).map(dueRunRow));
  // A transaction, or a handle with a plugin (tests): through Kysely, as objects.
  const rows = await db.executeQuery<Omit<DueRunRow, 'seq'> & { rowid: number }>(CompiledQuery.raw(DUE_TEXT, params));
  return rows.rows.map(({ rowid, ...row }) => ({ ...row, seq: rowid }));
}

const DUE_TEXT = `select rowid, id, workspace_id, trigger_id, automation_status, lease_fence, wake_seq, payload, subject_record_id, source_id, source_version, engine_state, failures, lease_owner
  from runs
  where automation_status in ('scheduled', 'running') and available_at <= ? and rowid not in (select value from json_each(?))
  order by available_at
  limit ?`;

/**
 * Read as arrays and made into rows here: better-sqlite3 building each row's object by column
 * name took half again as long (about 1.3 µs a run, 2026-11-28).
 */
const dueStatementOf = weakMemo((connection: BetterSqlite3.Database) => connection.prepare(DUE_TEXT).raw(true));

type DueRunColumns = [number, string, string, string, string, number, number, string | null, string | null, string, number, string | null, number, string | null];

function dueRunRow(c: DueRunColumns): DueRunRow {
  return {
    seq: c[0], id: c[1], workspace_id: c[2], trigger_id: c[3], automation_status: c[4], lease_fence: c[5], wake_seq: c[6], payload: c[7],
    subject_record_id: c[8], source_id: c[9], source_version: c[10], engine_state: c[11], failures: c[12], lease_owner: c[13],
  };
}

/**
 * Claims a run read due whose lease ran out: at once, raising the fence, so that its stale holder
 * writes nothing more from here on. Only if no one claimed it since it was read. Answers the new
 * fence, or null.
 */
export async function takeOver(
  db: DbOrTx,
  claim: { runId: string; readFence: number; owner: string; now: string; leaseUntil: string },
): Promise<number | null> {
  const rows = await runHot<{ lease_fence: number }>(db, TAKE_OVER, () => [claim.owner, claim.leaseUntil, claim.runId, claim.readFence, claim.now]);
  return rows.length === 1 ? Number(rows[0].lease_fence) : null;
}

const takeOverText = `update runs set lease_owner = ?, lease_fence = lease_fence + 1, available_at = ?
  where id = ? and lease_fence = ? and available_at <= ? and automation_status in ('scheduled', 'running')
  returning lease_fence`;
const TAKE_OVER: HotStatement = { name: 'carepath_take_over_run_v1', sqlite: takeOverText, postgres: numbered(takeOverText) };
