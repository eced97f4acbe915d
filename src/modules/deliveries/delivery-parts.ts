/**
 * A delivery too large for one transaction is applied in parts, each in its own transaction.
 *
 * Why: a 20 MiB body of small resources is about 150,000 items, and applied in one transaction it
 * held SQLite's one connection, and with it every request of the service, for 9.5 s (the serving
 * thread runs better-sqlite3's statements); on PostgreSQL it held the rows it touched as long.
 * In parts of `PART_ITEMS`, each commit lets the requests queued meanwhile through.
 *
 * Parts go in delivery order, and each sees what the ones before it wrote, so the outcome is that
 * of the items applied one after the other, as within one transaction. What differs while the
 * delivery is `processing`: the records of parts committed are searchable, and the runs they
 * started are created and the runs waiting for their events woken, before the rest is applied.
 *
 * Crash safety: each part's transaction moves `delivery_progress` on with the changes it commits
 * (migration 0014), so a process that dies between parts leaves the next processor exactly where
 * to go on: no item is applied twice, none skipped. A part's wakes are kept in the row until they
 * are handed over (`handedOverWakes`), so those of a part whose process died are carried by the
 * next part. The last part writes the totals onto the delivery (`markProcessed`) and deletes the
 * row. A row whose delivery was finished by a processor of an earlier version, which knows
 * nothing of parts, is left behind with its wakes: `sweepLeftProgress` hands them over.
 */
import type { DbOrTx } from '../../storage/database.js';
import { parseJson } from '../../lib/json.js';
import type { PendingWake } from './event-wake.js';
import type { DeliveryProblem } from '../../ingestion/delivery-body.js';

/**
 * Items applied in one transaction at most: deliveries claimed together share a transaction up
 * to this size (delivery-processor.ts), and a larger one is applied this many items at a time.
 * About 60 ms of a transaction on SQLite for small Patients (the largest share per item).
 */
export const PART_ITEMS = 1000;

export type EventCount = { event: string; count: number };

/** What the parts of a delivery committed so far have done. */
export interface DeliveryProgress {
  appliedItems: number;
  events: EventCount[];
  runsStarted: number;
  pendingWakes: PendingWake[];
  /** items skipped as older than the version stored (resource-changes.ts), listed with the delivery's other skipped items at the end */
  skipped: DeliveryProblem[];
}

export const NO_PROGRESS: DeliveryProgress = { appliedItems: 0, events: [], runsStarted: 0, pendingWakes: [], skipped: [] };

/** Event counts added up, sorted by event. */
export function addEventCounts(a: readonly EventCount[], b: readonly EventCount[]): EventCount[] {
  const counts = new Map<string, number>();
  for (const { event, count } of [...a, ...b]) counts.set(event, (counts.get(event) ?? 0) + count);
  return [...counts].sort(([x], [y]) => (x < y ? -1 : 1)).map(([event, count]) => ({ event, count }));
}

/** The delivery's progress (inside the transaction applying its next part); none before the first part. */
export async function readProgress(db: DbOrTx, deliveryId: string): Promise<DeliveryProgress> {
  const row = await db.selectFrom('delivery_progress').selectAll().where('delivery_id', '=', deliveryId).executeTakeFirst();
  if (!row) return NO_PROGRESS;
  return {
    appliedItems: row.applied_items,
    events: parseJson<EventCount[]>(row.events, []),
    runsStarted: row.runs_started,
    pendingWakes: parseJson<PendingWake[]>(row.pending_wakes, []),
    skipped: parseJson<DeliveryProblem[]>(row.skipped, []),
  };
}

/** Items of the delivery applied so far, for a failure's message (0 when none, or not in parts). */
export async function appliedItemsOf(db: DbOrTx, deliveryId: string): Promise<number> {
  const row = await db.selectFrom('delivery_progress').select('applied_items').where('delivery_id', '=', deliveryId).executeTakeFirst();
  return row?.applied_items ?? 0;
}

/** Records what a part committed, in its transaction. */
export async function writeProgress(db: DbOrTx, deliveryId: string, progress: DeliveryProgress, at: string): Promise<void> {
  const values = {
    applied_items: progress.appliedItems,
    events: JSON.stringify(progress.events),
    runs_started: progress.runsStarted,
    pending_wakes: progress.pendingWakes.length === 0 ? null : JSON.stringify(progress.pendingWakes),
    skipped: progress.skipped.length === 0 ? null : JSON.stringify(progress.skipped),
    updated_at: at,
  };
  await db
    .insertInto('delivery_progress')
    .values({ delivery_id: deliveryId, ...values })
    .onConflict((oc) => oc.column('delivery_id').doUpdateSet(values))
    .execute();
}

/**
 * After a part's commit and its wakes handed over: they are no longer pending. Only while the
 * progress is this part's: a processor that took the delivery over meanwhile keeps its own.
 */
export async function handedOverWakes(db: DbOrTx, deliveryId: string, appliedItems: number): Promise<void> {
  await db.updateTable('delivery_progress').set({ pending_wakes: null }).where('delivery_id', '=', deliveryId).where('applied_items', '=', appliedItems).execute();
}

/**
 * Progress rows of deliveries that are processed: finished by a processor of an earlier version
 * (a rolling deploy), which applied the delivery whole and knew nothing of this row. Their wakes,
 * if any, were never handed over (the earlier version found the rest); handed over now, the rows
 * deleted. A wake handed over twice reaches no run twice (event-wake.ts).
 */
export async function leftProgress(db: DbOrTx, limit: number): Promise<{ deliveryId: string; workspaceId: string; wakes: PendingWake[] }[]> {
  const rows = await db
    .selectFrom('delivery_progress as p')
    .innerJoin('deliveries as d', 'd.id', 'p.delivery_id')
    .select(['p.delivery_id', 'd.workspace_id', 'p.pending_wakes'])
    .where('d.status', '=', 'processed')
    .limit(limit)
    .execute();
  return rows.map((row) => ({ deliveryId: row.delivery_id, workspaceId: row.workspace_id, wakes: parseJson<PendingWake[]>(row.pending_wakes, []) }));
}

/** The last part is committed with the delivery marked processed: its progress is on the delivery now. */
export async function deleteProgress(db: DbOrTx, deliveryId: string): Promise<void> {
  await db.deleteFrom('delivery_progress').where('delivery_id', '=', deliveryId).execute();
}
