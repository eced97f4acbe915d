/**
 * The entry point for inbound events (ingestion calls it): an event about a subject reaches
 * every run of that workspace waiting for it (wait_for_event). The event is recorded on each
 * waiting run, and the runs become due at once, in one transaction.
 *
 * A run held by a worker at that moment keeps its lease (taking it would make the worker's
 * step run twice); `wake_seq` is raised instead, so that worker cannot release the run to sleep
 * without seeing the event first. A paused run records the event and sees it on resume.
 *
 * Which waits see an event: those begun before it was raised, by two times that follow the
 * order of the transactions themselves. A wait's step (on PostgreSQL) holds the patient's rows
 * as a delivery about the patient does (records/record-locks.ts), and each stamps its time
 * inside its transaction once it holds them, from the store's clock (storage/store-clock.ts):
 * the wait's `started_at` as its row is written, the delivery's events once its locks are held.
 * So a wait begun first is committed before the delivery reads which subjects may wait, and its
 * time is the earlier one; a wait begun after the delivery is later by both. Stamped before
 * their transactions (the step when it was planned, the delivery when it was taken), a wait
 * committed after the delivery's wake had looked could carry the earlier time: its event was
 * lost, the run waiting for its timeout (a scale-out review: 10 runs in 200 under load).
 */
import { sql } from 'kysely';
import type { Db, DbOrTx } from '../storage/database.js';
import { dialectOfDb } from '../storage/dialect.js';

export interface InboundEvent {
  workspaceId: string;
  subjectRecordId: string;
  /** e.g. `Encounter.finished` (exact, case-sensitive). */
  event: string;
  /** What the step's output will be: `{event, at, payload}`. */
  eventPayload: unknown;
  /** When the event was raised: waits begun after it do not see it. */
  at: string;
}

/**
 * Records the event for every run of the subject that was waiting for it when it was raised;
 * answers how many. A wait begun after `at` does not see it (docs/automations.md: events raised
 * before the step started are not seen), also when the event comes late: handed on after a
 * crash by another process, a minute on, it woke a run that began waiting after it was raised.
 */
export async function wakeRunsWaitingFor(db: Db, inbound: InboundEvent): Promise<number> {
  const recorded = JSON.stringify({ event: inbound.event, at: inbound.at, payload: inbound.eventPayload ?? null });
  return db.transaction().execute(async (tx) => {
    // The runs first, then their waits: the order a cancel (run-actions.ts) and a worker's step
    // take them in. Waits first deadlocked against a cancel on PostgreSQL, and the cancel was
    // answered 503 while the run went on (a review of races: 2 of 30 such cancels).
    // Only the waits of the runs locked: one committed after the lock's read is for a later event.
    const locked = dialectOfDb(tx) === 'postgres' ? await lockWaitingRuns(tx, inbound) : null;
    if (locked !== null && locked.length === 0) return 0;
    const waiting = await tx
      .updateTable('run_event_waits')
      .set({ received_at: inbound.at, received_event: recorded })
      .$if(locked !== null, (query) => query.where('run_id', 'in', locked!))
      .where('workspace_id', '=', inbound.workspaceId)
      .where('subject_record_id', '=', inbound.subjectRecordId)
      .where('event', '=', inbound.event)
      .where('started_at', '<=', inbound.at)
      .where('received_at', 'is', null)
      .returning('run_id')
      .execute();
    const runIds = [...new Set(waiting.map((row) => row.run_id))];
    if (runIds.length === 0) return 0;
    await tx
      .updateTable('runs')
      .set((eb) => ({
        wake_seq: eb('wake_seq', '+', 1),
        // Due now unless a worker holds it (its lease end stays; it will see the event).
        available_at: sql<string>`case when lease_owner is null and available_at > ${inbound.at} then ${inbound.at} else available_at end`,
      }))
      .where('id', 'in', runIds)
      .execute();
    return runIds.length;
  });
}

/**
 * PostgreSQL: the runs with a wait for this event, locked in id order before the waits are
 * touched; their ids. (SQLite runs one write transaction at a time: nothing to order.)
 */
async function lockWaitingRuns(tx: DbOrTx, inbound: InboundEvent): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    select id from runs
    where id in (
      select run_id from run_event_waits
      where workspace_id = ${inbound.workspaceId} and subject_record_id = ${inbound.subjectRecordId}
        and event = ${inbound.event} and started_at <= ${inbound.at} and received_at is null
    )
    order by id
    for update`.execute(tx);
  return rows.map((row) => row.id);
}
