/**
 * Claims up to `limit` runs that a worker may execute: `scheduled` or `running`, and due
 * (`available_at` passed: never leased, lease expired, or timer due). Each claim raises the
 * run's fence and leases it to `owner` until `leaseUntil`, in one statement.
 *
 * PostgreSQL: `FOR UPDATE SKIP LOCKED` lets any number of workers claim side by side, each
 * skipping the rows another is claiming; no run goes to two. SQLite: one statement on one
 * connection is atomic already.
 */
import { sql } from 'kysely';
import type { DbOrTx } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';

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
  let due = db
    .selectFrom('runs')
    .select('id')
    // Literal statuses, so the planner matches the partial index runs_claimable.
    .where(sql<boolean>`automation_status in ('scheduled', 'running')`)
    .where('available_at', '<=', claim.now)
    .orderBy('available_at')
    .limit(claim.limit);
  if (dialect === 'postgres') due = due.forUpdate().skipLocked();
  return db
    .updateTable('runs')
    .set((eb) => ({
      lease_owner: claim.owner,
      lease_fence: eb('lease_fence', '+', 1),
      available_at: claim.leaseUntil,
    }))
    .where('id', 'in', due)
    .returning([
      'id',
      'workspace_id',
      'trigger_id',
      'automation_status',
      'lease_fence',
      'wake_seq',
      'payload',
      'subject_record_id',
      'source_id',
      'source_version',
      'engine_state',
    ])
    .execute();
}
