/**
 * Rows of delivered resources locked in one order, the same in every process and every kind of
 * transaction: per workspace, their resource states, then their records (Patient, Practitioner),
 * keys sorted. Deliveries lock what they will change this way first (deliveries/resource-locks.ts),
 * and so does a batch of engine steps that change a patient's record (a `tag` step:
 * engine/step-committer.ts). Taken in any other order, two such transactions each held what the
 * other wanted next: a step's tag change held a patient's record and waited for its resource
 * state, which a delivery about that patient held while it waited for the record (a soak review:
 * hundreds of deadlocks a minute on 13 patients, runs retried, calls made twice).
 *
 * PostgreSQL only: SQLite has one writer at a time.
 */
import { sql } from 'kysely';
import type { DbOrTx } from '../../storage/database.js';

const RECORD_TYPES = new Set(['Patient', 'Practitioner']);

/** A delivered resource's record, as a transaction that changes it names it. */
export interface RecordKey {
  workspaceId: string;
  resourceType: string;
  extId: string;
}

/** The states, then the records, of these (type, id) keys of one workspace, locked in key order. */
export async function lockStoredResources(tx: DbOrTx, workspaceId: string, keys: readonly [string, string][]): Promise<void> {
  await lockRows(tx, 'resource_states', 'resource_id', workspaceId, keys);
  await lockRows(tx, 'records', 'ext_id', workspaceId, keys.filter(([type]) => RECORD_TYPES.has(type)));
}

/** Records by workspace and (type, extId), locked with their states: workspaces in order, each as `lockStoredResources`. */
export async function lockRecordsInOrder(tx: DbOrTx, records: readonly RecordKey[]): Promise<void> {
  const byWorkspace = new Map<string, [string, string][]>();
  for (const { workspaceId, resourceType, extId } of records) {
    const keys = byWorkspace.get(workspaceId) ?? [];
    keys.push([resourceType, extId]);
    byWorkspace.set(workspaceId, keys);
  }
  for (const workspaceId of [...byWorkspace.keys()].sort()) await lockStoredResources(tx, workspaceId, byWorkspace.get(workspaceId)!);
}

/**
 * The rows of `table` with these (type, id) keys in the workspace, locked in key order: the keys
 * sorted here, then each row found through the key's index entry (a lateral subquery per key).
 * Written as `(type, id) in (select … from unnest(…))`, the plan hung on the table's statistics:
 * a table grown since it was last analyzed (a large delivery's parts, each locking its 1,000
 * keys) was read whole once a part, 25–45 ms a statement and growing (2026-11-27).
 */
async function lockRows(
  tx: DbOrTx,
  table: 'resource_states' | 'records',
  idColumn: 'resource_id' | 'ext_id',
  workspaceId: string,
  keys: readonly [string, string][],
): Promise<void> {
  if (keys.length === 0) return;
  const id = sql.ref(`r.${idColumn}`);
  await sql`
    select 1 from ${keyRows(inKeyOrder(keys), true)}
    cross join lateral (
      select 1 from ${sql.table(table)} r
      where r.workspace_id = ${workspaceId} and r.resource_type = k.t and ${id} = k.i
      for update
    ) locked
    order by k.n`.execute(tx);
}

/** Keys sorted one way in every process (by code units), so two groups lock them in the same order. */
function inKeyOrder(keys: readonly [string, string][]): [string, string][] {
  return [...keys].sort(([ta, ia], [tb, ib]) => (ta < tb ? -1 : ta > tb ? 1 : ia < ib ? -1 : ia > ib ? 1 : 0));
}

/** The (type, id) keys as rows `k (t, i)`: two array parameters, whatever their number. */
export function keyRows(keys: readonly [string, string][], numbered = false) {
  const unnest = sql`unnest(${keys.map(([type]) => type)}::text[], ${keys.map(([, key]) => key)}::text[])`;
  return numbered ? sql`${unnest} with ordinality as k (t, i, n)` : sql`${unnest} as k (t, i)`;
}
