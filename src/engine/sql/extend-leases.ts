/**
 * The heartbeat: extends the leases a worker still holds, each only at the fence it claimed
 * with. Returns the ids still held; a run missing from the answer was taken over (or ended) and
 * the worker must let it go.
 *
 * On PostgreSQL the heartbeat never waits for a row lock: rows another transaction has locked
 * are skipped (SKIP LOCKED) and only read, to learn whether they are still held. It used to wait,
 * and a worker's heartbeat and its own group commit, each updating many of its runs' rows in
 * its own order, deadlocked (a durability review: three times in twenty minutes under load);
 * the commit's batch was rolled back and its calls made again. A row locked right now is almost
 * always one the worker's own commit is writing; its lease is extended at the next beat, a third
 * of a lease later.
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
  const skipped = leases.filter((lease) => !held.has(lease.runId));
  if (skipped.length > 0) {
    for (const row of await db.selectFrom('runs').select('id').where(heldBy(skipped)).execute()) held.add(row.id);
  }
  return held;
}
