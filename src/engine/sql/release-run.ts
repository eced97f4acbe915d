/**
 * Lets go of a run: the lease ends and the run is due again at `availableAt` (its next timer,
 * or now). With `wakeSeq`, only if no event made the run due since the worker last looked;
 * otherwise false, and the worker looks again instead of sleeping past the event. With
 * `failed`, executing it failed unexpectedly: one more failure in a row (`runs.failures`).
 */
import type { DbOrTx } from '../../storage/database.js';
import type { Lease } from './lease.js';

export async function releaseRun(
  db: DbOrTx,
  lease: Lease,
  release: { availableAt: string; state?: string; wakeSeq?: number; failed?: boolean },
): Promise<boolean> {
  let update = db
    .updateTable('runs')
    .set((eb) => ({
      lease_owner: null,
      available_at: release.availableAt,
      ...(release.state !== undefined ? { engine_state: release.state } : {}),
      ...(release.failed ? { failures: eb('failures', '+', 1) } : {}),
    }))
    .where('id', '=', lease.runId)
    .where('lease_owner', '=', lease.owner)
    .where('lease_fence', '=', lease.fence);
  if (release.wakeSeq !== undefined) update = update.where('wake_seq', '=', release.wakeSeq);
  const result = await update.executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * A run that had failed executed cleanly under this claim: its count of failures in a row starts
 * again. Only if no other worker has claimed it since (the fence is the claim's).
 */
export async function clearFailures(db: DbOrTx, lease: Lease): Promise<void> {
  await db
    .updateTable('runs')
    .set({ failures: 0 })
    .where('id', '=', lease.runId)
    .where('lease_fence', '=', lease.fence)
    .where('failures', '>', 0)
    .execute();
}
