import type { DbOrTx } from '../storage/database.js';
import type { RunStatus } from './run-status.js';
import type { Lease } from './sql/lease.js';
import { memoText, placeholders, runSql } from './sql/prepared.js';

/**
 * The one write that changes a run's status. It is guarded by the status the caller read
 * (compare-and-set), so two processes acting on one run cannot both win; the loser sees `false`
 * and reads again. The run's Pathway record follows: its status tag is swapped in the same
 * transaction, so search never sees a run in two states.
 *
 * The engine adds a guard of its own: `endLease` makes the write conditional on the worker's
 * lease still being current (fencing) and ends that lease with it.
 */
export async function setRunStatus(
  db: DbOrTx,
  change: {
    runId: string;
    from: RunStatus;
    to: RunStatus;
    at: string;
    error?: { message: string; nodeId: string } | null;
    endLease?: Pick<Lease, 'owner' | 'fence'>;
  },
): Promise<boolean> {
  let update = db
    .updateTable('runs')
    .set({
      automation_status: change.to,
      updated_at: change.at,
      ...(change.error !== undefined ? { error: change.error ? JSON.stringify(change.error) : null } : {}),
      ...(change.endLease ? { lease_owner: null } : {}),
    })
    .where('id', '=', change.runId)
    .where('automation_status', '=', change.from);
  if (change.endLease) {
    update = update.where('lease_owner', '=', change.endLease.owner).where('lease_fence', '=', change.endLease.fence);
  }
  const result = await update.executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return false;
  if (change.from !== change.to) await swapStatusTags(db, [change.runId], change.from, change.to, change.at);
  return true;
}

/**
 * The Pathway records of these runs trade their `from` status tag for `to`: the second half of
 * every status change (the engine's batched writes call it after their own guarded UPDATE).
 * Three statements whatever the number of runs; their texts are made once per count
 * (sql/prepared.ts), as this runs for every batch a worker commits.
 */
export async function swapStatusTags(db: DbOrTx, runIds: string[], from: RunStatus, to: RunStatus, at: string): Promise<void> {
  const n = runIds.length;
  if (n === 0) return;
  const texts = memoText(swapTexts, n, () => swapStatements(n));
  await runSql(db, texts[0], [...runIds, from]);
  // The tag row takes its workspace from the record itself: one statement, no read first.
  await runSql(db, texts[1], [to, ...runIds]);
  await runSql(db, texts[2], [at, ...runIds]);
}

const swapTexts = new Map<number, string[]>();

/** The three statements of a swap of `n` runs' tags. */
function swapStatements(n: number): string[] {
  const ids = placeholders(n);
  return [
    `delete from record_tags where record_id in ${ids} and tag = ?`,
    `insert into record_tags (record_id, workspace_id, tag) select records.id, records.workspace_id, ? from records where records.id in ${ids} on conflict (record_id, tag) do nothing`,
    `update records set updated_at = ? where id in ${ids}`,
  ];
}
