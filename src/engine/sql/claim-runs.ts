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
