/** Rows of `run_event_waits`: a wait_for_event in progress, and the event once it came. */
import type { DbOrTx, RunEventWaitTable } from '../../storage/database.js';
import { parseJson } from '../../lib/json.js';
import { storeNowValue } from '../../storage/store-clock.js';
import type { ReceivedEvent } from '../executor.js';

/**
 * A wait begins. Its `started_at` is the store's clock as this statement runs (storage/
 * store-clock.ts), not the step's time: on PostgreSQL the step's transaction holds the patient's
 * rows by now, so a delivery about the patient raised its events wholly before or wholly after
 * this time (engine/event-waits.ts).
 */
export async function insertEventWait(
  db: DbOrTx,
  row: Omit<RunEventWaitTable, 'received_at' | 'received_event' | 'started_at'>,
): Promise<void> {
  await db
    .insertInto('run_event_waits')
    .values({ ...row, started_at: storeNowValue(db), received_at: null, received_event: null })
    .onConflict((oc) =>
      oc.columns(['run_id', 'node_id']).doUpdateSet((eb) => ({
        automation_id: row.automation_id,
        event: row.event,
        subject_record_id: row.subject_record_id,
        started_at: eb.ref('excluded.started_at'),
        received_at: null,
        received_event: null,
      })),
    )
    .execute();
}

/** Ends a wait. With `onlyIfNoEvent`, only while no event was recorded (a timeout); false otherwise. */
export async function deleteEventWait(
  db: DbOrTx,
  key: { runId: string; nodeId: string },
  options: { onlyIfNoEvent: boolean },
): Promise<boolean> {
  let query = db.deleteFrom('run_event_waits').where('run_id', '=', key.runId).where('node_id', '=', key.nodeId);
  if (options.onlyIfNoEvent) query = query.where('received_at', 'is', null);
  const result = await query.executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

/** Events recorded for a run's waits, by node id. */
export async function receivedEvents(db: DbOrTx, runId: string): Promise<Map<string, ReceivedEvent>> {
  const rows = await db
    .selectFrom('run_event_waits')
    .select(['node_id', 'received_at', 'received_event'])
    .where('run_id', '=', runId)
    .where('received_at', 'is not', null)
    .execute();
  return new Map(rows.map((row) => [row.node_id, { at: row.received_at!, event: parseJson(row.received_event, null) }]));
}
