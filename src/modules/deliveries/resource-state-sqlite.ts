/**
 * Resource states (resource-state.repository.ts) read and written through prepared SQLite
 * statements: the same statements as the Kysely versions there, without building them per
 * delivery (sqlite-delivery-statements.ts says why and when they may run).
 */
import { splitKey, type ResourceState } from '../../ingestion/resource-changes.js';
import { splitStates, statesOfRows, type StateRow } from './resource-state.repository.js';
import type { SqliteDeliveryStatements } from './sqlite-delivery-statements.js';

export function readResourceStatesSqlite(s: SqliteDeliveryStatements, workspaceId: string, keys: Iterable<string>): Map<string, ResourceState> {
  const wanted = new Set(keys);
  if (wanted.size === 0) return new Map();
  const rows = s.readStates.all(JSON.stringify([...wanted].map(splitKey)), workspaceId) as StateRow[];
  return statesOfRows(rows, wanted);
}

export function writeResourceStatesSqlite(
  s: SqliteDeliveryStatements,
  workspaceId: string,
  states: ReadonlyMap<string, ResourceState | null>,
  deliveryId: string,
  at: string,
): void {
  const { upserts, deleted } = splitStates(states);
  if (upserts.length > 0) s.upsertStates.run(workspaceId, deliveryId, at, JSON.stringify(upserts));
  for (const key of deleted) {
    const [type, id] = splitKey(key);
    s.deleteState.run(workspaceId, type, id);
  }
}
