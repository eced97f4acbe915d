/**
 * Claims up to `limit` runs that a worker may execute: `scheduled` or `running`, and due
 * (`available_at` passed: never leased, lease expired, or timer due). Each claim raises the
 * run's fence and leases it to `owner` until `leaseUntil`, in one statement.
 *
 * PostgreSQL: `FOR UPDATE SKIP LOCKED` lets any number of workers claim side by side, each
 * skipping the rows another is claiming; no run goes to two. SQLite: one statement on one
 * connection is atomic already.
 *
 * On PostgreSQL the claim runs as a named (server-side prepared) statement when it goes to the
 * pool: a worker claims many times a second, and parsing and planning the same text each time
 * was CPU the database server, shared with the fire path and the worker on a small machine,
 * spent on nothing (src/engine/README.md, "Decisions"). On SQLite it runs synchronously as a
 * better-sqlite3 statement prepared once per connection, while Kysely's lock on the one serving
 * connection is held: no asynchronous round through the query executor for the worker's most
 * frequent statement. It stays one autocommit statement (its write lock is taken when it starts,
 * so another process committing meanwhile cannot make it fail).
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { DbOrTx } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';
import { postgresPoolOf, sqliteRunnerOf } from '../../storage/connect.js';
import { weakMemo } from '../../lib/weak-memo.js';
import { numbered, runSql } from './prepared.js';

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
}

export async function claimRuns(
  db: DbOrTx,
  dialect: Dialect,
  claim: { owner: string; now: string; leaseUntil: string; limit: number },
): Promise<ClaimedRunRow[]> {
  const params = [claim.owner, claim.leaseUntil, claim.now, claim.limit];
  const pool = dialect === 'postgres' ? postgresPoolOf(db) : undefined;
  if (pool) return (await pool.query<ClaimedRunRow>({ name: 'carepath_claim_runs_v1', text: CLAIM_POSTGRES_NUMBERED, values: params })).rows;
  const run = dialect === 'sqlite' ? sqliteRunnerOf(db) : undefined;
  if (run) return run((connection) => claimStatementOf(connection).all(...params) as ClaimedRunRow[]);
  const result = await runSql<ClaimedRunRow>(db, dialect === 'postgres' ? CLAIM_POSTGRES : CLAIM_SQLITE, params);
  return result.rows;
}

// Written once (sql/prepared.ts): this runs for every batch. Literal statuses, so the planner
// matches the partial index runs_claimable.
const claimText = (lock: string) => `update runs set lease_owner = ?, lease_fence = lease_fence + 1, available_at = ?
  where id in (
    select id from runs
    where automation_status in ('scheduled', 'running') and available_at <= ?
    order by available_at
    limit ?${lock}
  )
  returning id, workspace_id, trigger_id, automation_status, lease_fence, wake_seq, payload, subject_record_id, source_id, source_version, engine_state`;
const CLAIM_SQLITE = claimText('');
const CLAIM_POSTGRES = claimText(' for update skip locked');
const CLAIM_POSTGRES_NUMBERED = numbered(CLAIM_POSTGRES);

const claimStatementOf = weakMemo((connection: BetterSqlite3.Database) => connection.prepare(CLAIM_SQLITE));
