/**
 * SQL of planned runs: runs decided inside the transaction of their cause (a processed delivery,
 * a claimed schedule tick, an evaluation) and created right after through the run creator.
 * Each row carries a lease; whoever holds it creates the run, and a lease that runs out (its
 * process died) lets any other process take the row over.
 */
import type { Kysely } from 'kysely';
import type { Database, DbOrTx, PlannedRunTable } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';
import { TERMINAL_STATUSES } from '../../engine/run-status.js';
import { ID_CHUNK, chunks } from './sql-chunks.js';

export type PlannedRunRow = PlannedRunTable;

/** Rows per statement: 18 columns × 1,000 stays under both stores' bound-parameter limits. */
const INSERT_CHUNK = 1000;

export async function insertPlannedRuns(db: DbOrTx, rows: readonly PlannedRunRow[]): Promise<void> {
  for (const chunk of chunks(rows, INSERT_CHUNK)) await db.insertInto('planned_runs').values(chunk).execute();
}

/** Renews the lease on those of `ids` this owner still holds, and returns them. */
export async function renewOwnPlannedRuns(
  db: DbOrTx,
  ids: readonly string[],
  owner: string,
  leaseExpiresAt: string,
): Promise<PlannedRunRow[]> {
  if (ids.length === 0) return [];
  return db
    .updateTable('planned_runs')
    .set({ lease_expires_at: leaseExpiresAt })
    .where('id', 'in', ids)
    .where('lease_owner', '=', owner)
    .returningAll()
    .execute();
}

/**
 * Takes over up to `limit` rows whose lease ran out before `now`. On PostgreSQL the candidate
 * rows are locked with SKIP LOCKED, so processes sweeping at once take different rows; SQLite
 * has one writer at a time, so the UPDATE alone is enough.
 */
export async function takeOverExpiredPlannedRuns(
  db: Kysely<Database>,
  dialect: Dialect,
  owner: string,
  now: string,
  leaseExpiresAt: string,
  limit: number,
): Promise<PlannedRunRow[]> {
  return db
    .updateTable('planned_runs')
    .set({ lease_owner: owner, lease_expires_at: leaseExpiresAt })
    .where('id', 'in', (eb) => {
      const candidates = eb
        .selectFrom('planned_runs')
        .select('id')
        .where('lease_expires_at', '<', now)
        // In lease order, so the lease index answers it however many rows are held right now.
        .orderBy('lease_expires_at')
        .limit(limit);
      return dialect === 'postgres' ? candidates.forUpdate().skipLocked() : candidates;
    })
    .where('lease_expires_at', '<', now)
    .returningAll()
    .execute();
}

export async function deletePlannedRuns(db: DbOrTx, ids: readonly string[]): Promise<void> {
  for (const chunk of chunks(ids, ID_CHUNK)) await db.deleteFrom('planned_runs').where('id', 'in', chunk).execute();
}

/** Which of `ids` already exist as runs (a process died after creating them, before cleaning up). */
export async function existingRunIds(db: DbOrTx, ids: readonly string[]): Promise<Set<string>> {
  const found = new Set<string>();
  for (const chunk of chunks(ids, ID_CHUNK)) {
    const rows = await db.selectFrom('runs').select('id').where('id', 'in', chunk).execute();
    for (const row of rows) found.add(row.id);
  }
  return found;
}

/**
 * Those of these triggers that may still start runs: active and not deleted. A planned run of
 * any other is dropped, not made (DESIGN: no new run is made from a deleted or inactive trigger).
 */
export async function liveTriggerIds(db: DbOrTx, ids: readonly string[]): Promise<Set<string>> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return new Set();
  const rows = await db.selectFrom('triggers').select('id').where('id', 'in', unique).where('active', '=', 1).where('deleted_at', 'is', null).execute();
  return new Set(rows.map((row) => row.id));
}

export const subjectKey = (triggerId: string, subjectRecordId: string): string => `${triggerId}\u0000${subjectRecordId}`;

/**
 * The (trigger, subject) pairs among these that already have a run that is not terminal, or one
 * planned and not yet created: onePerSubject starts no second run for them (DESIGN §9).
 *
 * Both tables in ONE statement, so in one snapshot: a planned run becomes a run in two commits
 * (planned-runs.ts `createHeld`: the run, then the planned row's deletion), and two statements
 * under PostgreSQL's READ COMMITTED could read `runs` before the first and `planned_runs` after
 * the second, see neither, and start a second live run for the patient (a scale-out review, two
 * processes applying deliveries for one patient at once). In any one snapshot at least one of
 * the two rows is there.
 */
export async function subjectsWithLiveRuns(
  db: DbOrTx,
  triggerIds: readonly string[],
  subjectRecordIds: readonly string[],
): Promise<Set<string>> {
  const live = new Set<string>();
  if (triggerIds.length === 0 || subjectRecordIds.length === 0) return live;
  for (const chunk of chunks([...new Set(subjectRecordIds)], ID_CHUNK)) {
    const rows = await db
      .selectFrom('runs')
      .select(['trigger_id', 'subject_record_id'])
      .where('subject_record_id', 'in', chunk)
      .where('trigger_id', 'in', triggerIds)
      .where('automation_status', 'not in', TERMINAL_STATUSES)
      .unionAll(
        db
          .selectFrom('planned_runs')
          .select(['trigger_id', 'subject_record_id'])
          .where('trigger_id', 'in', triggerIds)
          .where('subject_record_id', 'in', chunk),
      )
      .execute();
    for (const row of rows) {
      if (row.subject_record_id) live.add(subjectKey(row.trigger_id, row.subject_record_id));
    }
  }
  return live;
}

/**
 * Locks the trigger rows for the rest of the transaction, so that two transactions deciding runs
 * of one onePerSubject trigger cannot both see "no live run" for a subject. PostgreSQL: row locks
 * taken in id order, so two transactions cannot deadlock. SQLite locks the whole database for a
 * writer: a no-op UPDATE takes the write lock now, before the reads that the decision rests on
 * (a deferred transaction would otherwise read first and could not upgrade later).
 */
export async function lockTriggers(db: DbOrTx, dialect: Dialect, triggerIds: readonly string[]): Promise<void> {
  if (triggerIds.length === 0) return;
  const ids = [...new Set(triggerIds)].sort();
  if (dialect === 'postgres') {
    await db.selectFrom('triggers').select('id').where('id', 'in', ids).orderBy('id').forUpdate().execute();
    return;
  }
  await db
    .updateTable('triggers')
    .set((eb) => ({ id: eb.ref('id') }))
    .where('id', 'in', ids)
    .execute();
}
