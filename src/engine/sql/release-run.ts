/**
 * Lets go of a run: the lease ends and the run is due again at `availableAt` (its next timer,
 * or now). With `wakeSeq`, only if no event made the run due since the worker last looked;
 * otherwise false, and the worker looks again instead of sleeping past the event.
 */
import type { DbOrTx } from '../../storage/database.js';
import type { Lease } from './lease.js';

export async function releaseRun(
  db: DbOrTx,
  lease: Lease,
  release: { availableAt: string; state?: string; wakeSeq?: number },
): Promise<boolean> {
  let update = db
    .updateTable('runs')
    .set({ lease_owner: null, available_at: release.availableAt, ...(release.state !== undefined ? { engine_state: release.state } : {}) })
    .where('id', '=', lease.runId)
    .where('lease_owner', '=', lease.owner)
    .where('lease_fence', '=', lease.fence);
  if (release.wakeSeq !== undefined) update = update.where('wake_seq', '=', release.wakeSeq);
  const result = await update.executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
