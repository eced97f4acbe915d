/**
 * SQLite: due runs read without claiming them (claim-on-write.ts: each run's first write claims
 * it), and the take-over of a run whose lease ran out, which cannot wait for a first write (its
 * stale holder may still write until the fence is raised). PostgreSQL claims (claim-runs.ts).
 */
import type BetterSqlite3 from 'better-sqlite3';
import { CompiledQuery } from 'kysely';
import type { DbOrTx } from '../../storage/database.js';
import { dialectOfDb } from '../../storage/dialect.js';
import { sqliteRunnerOf } from '../../storage/connect.js';
import { runHot, type HotStatement } from '../../storage/hot-statement.js';
import { weakMemo } from '../../lib/weak-memo.js';
import { numbered } from './prepared.js';
import type { ClaimedRunRow } from './claim-runs.js';

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
