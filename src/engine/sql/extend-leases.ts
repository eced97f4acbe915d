/**
 * The heartbeat: extends the leases a worker still holds, each only at the fence it claimed
 * with. Returns the ids extended; a run missing from the answer was taken over (or ended) and
 * the worker must let it go.
 */
import type { DbOrTx } from '../../storage/database.js';
import type { Lease } from './lease.js';

export async function extendLeases(db: DbOrTx, leases: Lease[], leaseUntil: string): Promise<Set<string>> {
  if (leases.length === 0) return new Set();
  const rows = await db
    .updateTable('runs')
    .set({ available_at: leaseUntil })
    .where((eb) =>
      eb.or(
        leases.map((lease) =>
          eb.and([eb('id', '=', lease.runId), eb('lease_owner', '=', lease.owner), eb('lease_fence', '=', lease.fence)]),
        ),
      ),
    )
    .returning('id')
    .execute();
  return new Set(rows.map((row) => row.id));
}
