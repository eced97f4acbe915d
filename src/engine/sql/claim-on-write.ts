/**
 * SQLite: a run's first write claims it (src/engine/README.md, "Claim on the first write").
 *
 * On SQLite the worker reads due runs instead of leasing them in a statement of their own: the
 * lease is taken by the run's first guarded write, in the same transaction, which holds only if
 * nothing has changed the run since it was read: no owner, the fence it was read at, the status
 * it was read in. A run's first write comes before anything it does outside the store (a call's
 * open step is committed before the call), so a run read by two workers is executed by the one
 * whose first write commits first; the other's write changes nothing and it lets the run go.
 *
 * Why: the claim was a transaction of its own for every batch, rewriting each run's row and
 * its place in the claim index, and then the first write rewrote the row again: about 18 µs of
 * a one-node run's 97 (timed per statement, docs/benchmarks.md). Read and claimed by its first
 * write, the run's row is written once.
 *
 * Only runs no one holds are read this way: a run whose lease ran out (its worker died or
 * stalled) is claimed at once as before, as its stale holder may still write until the claim
 * raises the fence. PostgreSQL keeps the claim statement (FOR UPDATE SKIP LOCKED): there several
 * workers read the same due runs, and reading without locking would have them race for each.
 */
import type { DbOrTx } from '../../storage/database.js';
import type { Lease, UnclaimedRun } from './lease.js';
import { runSql } from './prepared.js';
import { addMs } from '../../lib/clock.js';

/**
 * The claim's condition, after `where id = ?`: the parameters are the fence and status the run
 * was read at (`claimGuardParams`).
 */
export const UNCLAIMED_GUARD = 'lease_owner is null and lease_fence = ? and automation_status = ?';

/** The claim's own statement, for writes that are not made in one statement with it. */
const CLAIM_TEXT = `update runs set lease_owner = ?, lease_fence = lease_fence + 1, available_at = ? where id = ? and ${UNCLAIMED_GUARD} returning id`;

export function claimGuardParams(lease: Lease & { unclaimed: UnclaimedRun }): [number, string] {
  return [lease.fence, lease.unclaimed.status];
}

/** The lease as it reads once its claim is committed: the fence one higher, nothing pending. */
export function claimedLease(lease: Lease): Lease {
  return { runId: lease.runId, owner: lease.owner, fence: lease.fence + 1 };
}

/**
 * Records in the worker's lease that its claim was committed. Called only after the transaction
 * that claimed it committed: a batch rolled back leaves the lease unclaimed, and its retry claims
 * again.
 */
export function markClaimed(lease: Lease): void {
  if (!lease.unclaimed) return;
  lease.fence += 1;
  delete lease.unclaimed;
}

/** When a claim made at `at` lets its lease run out (the heartbeat extends it from then on). */
export function claimedUntil(lease: Lease & { unclaimed: UnclaimedRun }, at: string): string {
  return addMs(at, lease.unclaimed.leaseMs);
}

/**
 * Claims the run at `at` in a statement of its own (`db` may be a transaction). True when claimed
 * (the lease says so once committed: `markClaimed`); false when the run changed since it was read.
 */
export async function claimAlone(db: DbOrTx, lease: Lease & { unclaimed: UnclaimedRun }, at: string): Promise<boolean> {
  const result = await runSql<{ id: string }>(db, CLAIM_TEXT, [lease.owner, claimedUntil(lease, at), lease.runId, ...claimGuardParams(lease)]);
  return result.rows.length === 1;
}

/** A lease whose first write has yet to claim the run. */
export function isUnclaimed(lease: Lease): lease is Lease & { unclaimed: UnclaimedRun } {
  return lease.unclaimed !== undefined;
}
