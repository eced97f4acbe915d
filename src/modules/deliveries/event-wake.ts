/**
 * Raised events reach runs that wait for them (`wait_for_event`, DESIGN §6) through the run
 * engine's `wakeRunsWaitingFor`.
 *
 * That function opens its own transaction on the database, so it cannot join the delivery's
 * (and on SQLite, whose one connection the delivery's transaction holds, it would wait forever).
 * So the wakes are decided in the delivery's transaction and stored on the delivery row
 * (`pending_wakes`), handed to the engine right after the commit, and cleared. A process that
 * dies in between leaves them under a lease that runs out; any processor then delivers them.
 * A wake only touches waits that have not received their event and began before it was raised,
 * so delivering one again after such a crash is harmless for the runs that already got it, and
 * reaches no run that began waiting after the event.
 *
 * Most subjects have no run that could be waiting, so one query first narrows the events to
 * subjects with a running or paused run: a 10,000-entry bundle costs one query, not 10,000.
 */
import type { Db, DbOrTx } from '../../storage/database.js';
import type { Dialect } from '../../storage/connect.js';
import { wakeRunsWaitingFor } from '../../engine/event-waits.js';
import { parseJson } from '../../lib/json.js';
import type { EventOccurrence } from '../events/event-runs.js';
import { listParameter, runHot, type HotStatement } from '../../storage/hot-statement.js';

export interface PendingWake {
  subjectRecordId: string;
  event: string;
  /** When the delivery raised it (its processing). Absent from wakes stored before 2026-11-27. */
  raisedAt?: string;
  /** what the waiting step receives: the same `{event, resource, deliveryId}` as a run's payload */
  eventPayload: { event: string; resource: unknown; deliveryId: string };
}

/** The subjects of these occurrences (deduplicated). */
export function subjectsOf(occurrences: readonly EventOccurrence[]): string[] {
  return [...new Set(occurrences.flatMap((o) => (o.subjectRecordId === null ? [] : [o.subjectRecordId])))];
}

/**
 * Read once per group of deliveries: prepared (storage/hot-statement.ts), the subjects as one
 * list parameter. `running` and `paused`: the statuses in which a run may be waiting for an
 * event (a paused one records it for its resume).
 */
const MAY_WAIT_TEXT = (subjects: string) => `
  select distinct subject_record_id from runs
  where workspace_id = $W and subject_record_id ${subjects} and automation_status in ('running', 'paused')`;
const SUBJECTS_THAT_MAY_WAIT: HotStatement = {
  name: 'carepath_subjects_that_may_wait_v1',
  sqlite: MAY_WAIT_TEXT('in (select value from json_each(?))').replace('$W', '?'),
  postgres: MAY_WAIT_TEXT('= any($2::text[])').replace('$W', '$1'),
};

/** Which of these subjects have a running or paused run (inside the delivery's transaction). */
export async function subjectsThatMayWait(db: DbOrTx, workspaceId: string, subjects: readonly string[]): Promise<Set<string>> {
  if (subjects.length === 0) return new Set();
  const rows = await runHot<{ subject_record_id: string }>(db, SUBJECTS_THAT_MAY_WAIT, (dialect) => [workspaceId, listParameter(dialect, subjects)]);
  return new Set(rows.map((row) => row.subject_record_id));
}

/** The wakes a delivery's events call for, given which subjects may wait (`subjectsThatMayWait`). */
export function wakesFor(occurrences: readonly EventOccurrence[], mayWait: ReadonlySet<string>, deliveryId: string, raisedAt: string): PendingWake[] {
  return occurrences.flatMap((o) =>
    o.subjectRecordId !== null && mayWait.has(o.subjectRecordId)
      ? [{ subjectRecordId: o.subjectRecordId, event: o.event, raisedAt, eventPayload: { event: o.event, resource: JSON.parse(o.resourceJson) as unknown, deliveryId } }]
      : [],
  );
}

/**
 * Hands stored wakes to the engine, then clears them if this owner still holds the delivery. Each
 * wake carries the time its event was raised, which is what a waiting step records and which
 * waits begun later do not see; `at` stands in for it in wakes stored without one.
 */
export async function deliverWakes(
  db: Db,
  delivery: { id: string; workspaceId: string },
  owner: string,
  wakes: readonly PendingWake[],
  at: string,
): Promise<number> {
  const woken = await handOver(db, delivery.workspaceId, wakes, at);
  await db
    .updateTable('deliveries')
    .set({ pending_wakes: null, lease_owner: null, lease_expires_at: null })
    .where('id', '=', delivery.id)
    .where('lease_owner', '=', owner)
    .execute();
  return woken;
}

/** Hands wakes to the engine (`at` stands in for the time of wakes stored without one); answers how many runs woke. */
export async function handOver(db: Db, workspaceId: string, wakes: readonly PendingWake[], at: string): Promise<number> {
  let woken = 0;
  for (const wake of wakes) {
    woken += await wakeRunsWaitingFor(db, { workspaceId, subjectRecordId: wake.subjectRecordId, event: wake.event, eventPayload: wake.eventPayload, at: wake.raisedAt ?? at });
  }
  return woken;
}

/** Takes over processed deliveries whose wakes were left behind by a process that died, and delivers them. */
export async function sweepPendingWakes(db: Db, dialect: Dialect, owner: string, now: Date, leaseMs: number): Promise<number> {
  const at = now.toISOString();
  const taken = await db
    .updateTable('deliveries')
    .set({ lease_owner: owner, lease_expires_at: new Date(now.getTime() + leaseMs).toISOString() })
    .where('id', 'in', (eb) => {
      const candidates = eb
        .selectFrom('deliveries')
        .select('id')
        // Only processed deliveries have pending wakes (markProcessed sets them); no status test,
        // so both stores answer from the partial index deliveries_pending_wakes.
        .where('pending_wakes', 'is not', null)
        .where('lease_expires_at', '<', at)
        .orderBy('lease_expires_at')
        .limit(20);
      return dialect === 'postgres' ? candidates.forUpdate().skipLocked() : candidates;
    })
    .where('lease_expires_at', '<', at)
    .returning(['id', 'workspace_id', 'pending_wakes'])
    .execute();
  let woken = 0;
  for (const row of taken) {
    woken += await deliverWakes(db, { id: row.id, workspaceId: row.workspace_id }, owner, parseJson<PendingWake[]>(row.pending_wakes, []), at);
  }
  return woken;
}
