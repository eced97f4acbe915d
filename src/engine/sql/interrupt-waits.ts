/**
 * A run's steps in progress end with the run: open step records close as `canceled` and its
 * event waits are dropped, so no later event is recorded for it. Used by the API's cancel and
 * by the engine when a run ends while another of its branches still waits. (A worker in the
 * middle of a call still records that call's real outcome over this one: the call did happen.)
 */
import type { DbOrTx } from '../../storage/database.js';

export async function interruptWaits(db: DbOrTx, runId: string, at: string, reason: string): Promise<void> {
  await db
    .updateTable('run_steps')
    .set({ finished_at: at, outcome: 'canceled', error: reason })
    .where('run_id', '=', runId)
    .where('finished_at', 'is', null)
    .execute();
  await db.deleteFrom('run_event_waits').where('run_id', '=', runId).execute();
}
