import type { DbOrTx } from '../storage/database.js';
import type { RunStatus } from './run-status.js';

/**
 * The one write that changes a run's status. It is guarded by the status the caller read
 * (compare-and-set), so two processes acting on one run cannot both win; the loser sees `false`
 * and reads again. The run's Pathway record follows: its status tag is swapped in the same
 * transaction, so search never sees a run in two states.
 */
export async function setRunStatus(
  db: DbOrTx,
  change: {
    runId: string;
    from: RunStatus;
    to: RunStatus;
    at: string;
    error?: { message: string; nodeId: string } | null;
  },
): Promise<boolean> {
  const result = await db
    .updateTable('runs')
    .set({
      automation_status: change.to,
      updated_at: change.at,
      ...(change.error !== undefined ? { error: change.error ? JSON.stringify(change.error) : null } : {}),
    })
    .where('id', '=', change.runId)
    .where('automation_status', '=', change.from)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return false;
  if (change.from !== change.to) {
    await db.deleteFrom('record_tags').where('record_id', '=', change.runId).where('tag', '=', change.from).execute();
    const record = await db.selectFrom('records').select('workspace_id').where('id', '=', change.runId).executeTakeFirst();
    if (record) {
      await db
        .insertInto('record_tags')
        .values({ record_id: change.runId, workspace_id: record.workspace_id, tag: change.to })
        .onConflict((oc) => oc.columns(['record_id', 'tag']).doNothing())
        .execute();
      await db.updateTable('records').set({ updated_at: change.at }).where('id', '=', change.runId).execute();
    }
  }
  return true;
}
