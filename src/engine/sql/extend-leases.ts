/**
 * The heartbeat: extends the leases a worker still holds, each only at the fence it claimed
 * with. Returns the ids extended; a run missing from the answer was taken over (or ended) and
 * the worker must let it go.
 *
 * On PostgreSQL the many rows are extended in one statement that skips rows another
 * transaction has locked (SKIP LOCKED), then each skipped row alone, waiting for its lock. One
 * statement that waited for locks while holding others deadlocked with the worker's own group
 * commit, which locks many of the same rows in its own order (a durability review: three times
 * in twenty minutes under load; the commit was rolled back and its calls made again). A
 * statement for one row holds no other lock while it waits, so it closes no cycle; and a
 * heartbeat that only skipped locked rows let a lease run out when locks fell on two beats in
 * a row (a verification of that fix).
 */
import type { ExpressionBuilder } from 'kysely';
import type { Database, DbOrTx } from '../../storage/database.js';
import { dialectOfDb } from '../../storage/dialect.js';
import type { Lease } from './lease.js';

/** The rows of these leases, each at its owner and fence. */
const heldBy = (leases: Lease[]) => (eb: ExpressionBuilder<Database, 'runs'>) =>
  eb.or(leases.map((lease) => eb.and([eb('id', '=', lease.runId), eb('lease_owner', '=', lease.owner), eb('lease_fence', '=', lease.fence)])));

export async function extendLeases(db: DbOrTx, leases: Lease[], leaseUntil: string): Promise<Set<string>> {
  if (leases.length === 0) return new Set();
  if (dialectOfDb(db) === 'sqlite') {
    const rows = await db.updateTable('runs').set({ available_at: leaseUntil }).where(heldBy(leases)).returning('id').execute();
    return new Set(rows.map((row) => row.id));
  }
  const unlocked = db.selectFrom('runs').select('id').where(heldBy(leases)).forUpdate().skipLocked();
  const extended = await db.updateTable('runs').set({ available_at: leaseUntil }).where('id', 'in', unlocked).returning('id').execute();
  const held = new Set(extended.map((row) => row.id));
  // Skipped: locked, or no longer this worker's. Read first (no lock), so that only rows still
  // held wait for their lock; each alone.
  const skipped = leases.filter((lease) => !held.has(lease.runId));
  const stillHeld = skipped.length === 0 ? [] : await db.selectFrom('runs').select('id').where(heldBy(skipped)).execute();
  for (const { id } of stillHeld) {
    const lease = skipped.find((candidate) => candidate.runId === id)!;
    const one = await db.updateTable('runs').set({ available_at: leaseUntil }).where(heldBy([lease])).returning('id').executeTakeFirst();
    if (one) held.add(one.id);
  }
  return held;
}
