/**
 * On SQLite, leases a dead process left behind are given back at start. Leases exist so that,
 * when a process dies, another one can take its work over once they run out: 30 s for runs,
 * 60 s for deliveries and planned runs. On SQLite no other process can be alive (the process
 * lock, sqlite-process-lock.ts, admits one), so every lease found at start is a dead process's,
 * and waiting them out only delayed its runs: after a `kill -9` and a restart in 5 s, a run
 * resumed 30 s after its interrupted step.
 *
 * Fencing is kept: the next claim raises the run's fence as always. Only a process holding the
 * lock may call this, before its own worker and processor start.
 */
import type { DbOrTx } from './database.js';

export interface GivenBack {
  runs: number;
  deliveries: number;
  plannedRuns: number;
}

export async function giveBackLeasesOfDeadProcesses(db: DbOrTx, now: string): Promise<GivenBack> {
  const runs = await db
    .updateTable('runs')
    .set({ lease_owner: null, available_at: now })
    .where('lease_owner', 'is not', null)
    .where('automation_status', 'in', ['scheduled', 'running'])
    .executeTakeFirst();
  const deliveries = await db
    .updateTable('deliveries')
    .set({ lease_expires_at: now })
    .where('status', '=', 'processing')
    .where('lease_expires_at', '>', now)
    .executeTakeFirst();
  const plannedRuns = await db.updateTable('planned_runs').set({ lease_expires_at: now }).where('lease_expires_at', '>', now).executeTakeFirst();
  return {
    runs: Number(runs.numUpdatedRows),
    deliveries: Number(deliveries.numUpdatedRows),
    plannedRuns: Number(plannedRuns.numUpdatedRows),
  };
}
